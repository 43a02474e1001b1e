"""The benchmark suite runs end to end on CPU and writes sane results (correctness only, no timings)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("tff_accelerators", "flute_femnist", "pfl_cifar10", "memory_varying", "vs_plain")  # plus engine_overhead
POSITIVE = ("wall_seconds", "rounds_per_hour", "samples_per_s", "achieved_tflops", "peak_tflops", "peak_rss_mb")


def _run(args: list[str], results: Path, timeout: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(results)}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # every benchmark, engine_overhead's 9 fresh processes included: minutes on 2 busy cores
def test_it_runs_all_small_benchmarks_and_writes_results(tmp_path):
    from benchmarks.common import REQUIRED_KEYS

    proc = _run(["-m", "benchmarks", "all", "--size", "small", "--device", "cpu"], tmp_path, timeout=840)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in NAMES:
        record = json.loads((tmp_path / f"{name}-small-cpu.json").read_text())
        assert set(REQUIRED_KEYS) <= set(record), set(REQUIRED_KEYS) - set(record)
        assert record["benchmark"] == name and record["size"] == "small" and record["device"] == "cpu"
        assert record["peak_vram_mb"] is None  # CPU run: no VRAM figures
        for key in POSITIVE:
            assert math.isfinite(record[key]) and record[key] > 0, (name, key, record[key])
        assert 0 < record["peak_fraction"] < 10  # a fraction of a measured matmul peak
        assert record["anchor_ratio"] is not None and record["anchor_summary"]
        assert name in proc.stdout  # the table row was printed
    memory = json.loads((tmp_path / "memory_varying-small-cpu.json").read_text())
    assert memory["timed_rounds"] == 120 and memory["window_rounds"] == 10
    series = memory["rss_series_mb"]  # every round's RSS, and the slope of its second half (a creep, not a warm-up)
    assert len(series) == 120 and all(v > 0 for v in series)
    assert memory["rss_slope_mb_per_100_rounds_second_half"] == pytest.approx(
        100 * np.polyfit(np.arange(60), np.asarray(series[60:]), 1)[0], abs=1e-9
    )
    assert memory["distinct_cohort_sizes"] > 10 and len(memory["cohort_sizes"]) == 120
    assert memory["vram_reserved_series_mb"] is None  # CPU: no VRAM, so no series that reads as flat
    assert memory["rss_growth_mb"] == memory["last_window"]["peak_rss_mb"] - memory["first_window"]["peak_rss_mb"]
    assert isinstance(memory["within_1pct"], bool)
    for name in ("tff_accelerators", "flute_femnist", "pfl_cifar10"):  # small runs say they extrapolate
        assert "EXTRAPOLATED" in json.loads((tmp_path / f"{name}-small-cpu.json").read_text())["anchor_summary"]
    _check_engine_overhead(json.loads((tmp_path / "engine_overhead-small-cpu.json").read_text()))


@pytest.mark.slow
def test_it_compares_engine_and_plain_loop_on_quickstart(tmp_path):
    # The script must find the repository on its own; its JSON goes to a temporary folder.
    env = {**os.environ, "PYTHONPATH": "", "FEDWEB_BENCH_RESULTS": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "benchmarks/engine_throughput.py", "--rounds", "1", "--warmup", "0", "--device", "cpu"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith("quickstart: engine") and "plain loop" in line and "ratio" in line
    record = json.loads((tmp_path / "engine_throughput-auto-cpu.json").read_text())
    assert record["command"].startswith("python benchmarks/engine_throughput.py --rounds 1")
    assert {"cpu_model", "cpu_cores", "torch", "device_name"} <= set(record["machine"])
    assert record["ratio_per_round"]["min"] <= record["ratio_clients_per_s"] * 1.0001


def test_it_shares_the_plain_loop_and_learns_something():
    """Fast: two rounds of the plain loop on quickstart change the model and report sane counts."""
    import torch

    from benchmarks.engine_throughput import quickstart_spec
    from benchmarks.plain import PlainFedAvg
    from fedweb_engine.data import build_data

    spec = quickstart_spec("cpu").replace(participation={"clients_per_round": 3})
    plain = PlainFedAvg(spec, build_data(spec.data, spec.seed), torch.device("cpu"))
    before = {k: v.clone() for k, v in plain.global_state.items()}
    r = plain.next_round()
    assert r.clients == 3 and r.samples > 0 and math.isfinite(r.train_loss)
    assert any(not torch.equal(before[k], plain.global_state[k]) for k in before)


def _check_engine_overhead(record: dict) -> None:
    """engine_overhead's record (written by the ``all`` run above, which includes it)."""
    from benchmarks.common import REQUIRED_KEYS

    assert set(REQUIRED_KEYS) <= set(record)
    assert {"cpu_model", "cpu_cores", "torch", "device_name"} <= set(record["machine"])
    algorithms = ["fedavg", "fedprox", "scaffold"]
    assert list(record["algorithms"]) == algorithms
    for per in record["algorithms"].values():
        rows = per["contenders"]
        assert set(rows) == {"engine", "engine_eager", "vmap_loop", "plain_loop"}
        for row in rows.values():
            assert row["clients_per_s"] > 0 and row["peak_rss_mb"] > 0 and math.isfinite(row["final_train_loss"])
            assert row["run_seconds"] > 0 and row["compile_seconds"] >= 0
        for key in ("engine_vs_vmap_loop", "engine_eager_vs_vmap_loop", "run_total_engine_vs_vmap_loop"):
            assert per["ratios"][key]["min"] <= per["ratios"][key]["median"] <= per["ratios"][key]["max"]
        assert "whole run with compilation" in per["summary"]
        check = per["baseline_check"]
        assert check["valid"] == (check["ratio"] >= 1.8)
        assert ("BASELINE INVALID" in per["summary"]) == (not check["valid"])
    # Interleaved: per repeat, per algorithm, engine, engine eager, vmap loop, plain loop; each run's own peak RSS.
    contenders = ["engine", "engine_eager", "vmap_loop", "plain_loop"]
    assert [(r["algorithm"], r["contender"]) for r in record["runs"]] == [
        (a, c) for _ in range(record["repeats"]) for a in algorithms for c in contenders
    ]
    assert record["repeats"] >= 3
    assert len({r["peak_rss_mb"] for r in record["runs"]}) > 1  # not one inherited figure for all
    # The headline is the worst algorithm's; the load average is recorded.
    worst = min(p["ratios"]["engine_vs_vmap_loop"]["median"] for p in record["algorithms"].values())
    assert record["ratio_clients_per_s_vs_vmap_loop"] == worst
    assert record["meets_target"] == all(p["meets_target"] for p in record["algorithms"].values())
    assert len(record["load_average"]["before"]) == 3
    # A small run fills no compile cache (a fresh folder): auto keeps the engine eager and says why.
    assert record["cache_fill"] is None
    for run in record["runs"]:
        compiled = run["compile"]
        if run["contender"] == "engine":
            assert compiled["mode"] == "auto" and not compiled["compiling"] and compiled["graphs"] == 0
        elif run["contender"] == "engine_eager":
            assert compiled["mode"] == "off" and compiled["decision"] is None
        else:
            assert compiled is None


def test_it_measures_a_contenders_own_peak_rss():
    """A child launched by a process with a big peak reports its own, smaller peak (not ru_maxrss)."""
    from benchmarks.contenders import run_contender

    parent_peak = bytearray(300 * 2**20)  # this process's peak is now at least 300 MB above the child's
    code = "from benchmarks.contenders import dump, own_peak_rss_mb, reset_peak_rss; reset_peak_rss(); " \
        "x = bytearray(50 * 2**20); dump({'peak_rss_mb': own_peak_rss_mb()})"  # fmt: skip
    row = run_contender([sys.executable, "-c", code], {**os.environ, "PYTHONPATH": str(ROOT)})
    del parent_peak
    assert 50 < row["peak_rss_mb"] < 250, row
    assert 0 < row["sampled_peak_rss_mb"] <= row["peak_rss_mb"] + 5, row


def test_it_trains_every_client_with_the_vectorised_loop():
    import torch

    from benchmarks.plain_vmap import VmapFedAvg
    from fedweb_engine.data import build_data
    from fedweb_engine.spec.presets import preset_spec

    spec = preset_spec("varying-participants").replace(
        rounds=8, data={"mean_samples": 20}, compute={"device": "cpu"}, local={"lr": 0.1}
    )
    data = build_data(spec.data, spec.seed)
    loop = VmapFedAvg(spec, data, torch.device("cpu"))
    first = loop.next_round()
    sizes, epochs = data.offsets.diff(), spec.local.epochs
    assert first.clients == spec.cohort_size(1)  # every sampled client trains every local epoch:
    assert epochs * first.clients * int(sizes.min()) <= first.samples <= epochs * first.clients * int(sizes.max())
    rounds = [loop.next_round() for _ in range(7)]
    assert rounds[-1].train_loss < first.train_loss  # it learns


def test_it_vmaps_only_the_clients_that_still_have_a_batch():
    import torch

    from benchmarks.plain_vmap import VmapFedAvg
    from fedweb_engine.data import build_data
    from fedweb_engine.spec.presets import preset_spec

    spec = preset_spec("varying-participants").replace(rounds=2, data={"mean_samples": 20}, compute={"device": "cpu"})
    data = build_data(spec.data, spec.seed)
    loop = VmapFedAvg(spec, data, torch.device("cpu"))
    by_size = data.offsets.diff().argsort().tolist()
    cohort = by_size[:6] + by_size[-6:]  # the smallest and the largest clients: different step counts
    rows, active, ids, sizes, steps = loop._batches(cohort)
    assert steps == sorted(steps, reverse=True) and active[0] == 12  # longest first: the active ones are a prefix
    assert active == [sum(1 for n in steps if n > s) for s in range(steps[0])]
    assert active[-1] < 12  # later steps run fewer clients: no padding to the longest
    for s, k in enumerate(active):
        assert bool((rows[s, :k, 0] >= 0).all()) and bool((rows[s, k:] < 0).all())
    assert sorted(ids.tolist()) == sorted(cohort)  # the clients' ids in the stack's order


@pytest.mark.parametrize("algorithm,options", [("fedprox", {"mu": 0.5}), ("scaffold", {})])
def test_the_loops_run_the_client_algorithms(algorithm, options):
    """Both hand-written loops run FedProx and SCAFFOLD: the update differs from FedAvg's, and
    SCAFFOLD's control variates move (c is the mean of the clients' c_i, as option II keeps it)."""
    import torch

    from benchmarks.plain import PlainFedAvg
    from benchmarks.plain_vmap import VmapFedAvg
    from fedweb_engine.data import build_data
    from fedweb_engine.spec.presets import preset_spec

    base = preset_spec("varying-participants").replace(
        rounds=2, data={"mean_samples": 20, "num_clients": 8}, compute={"device": "cpu"},
        participation={"schedule": [5, 5]},
    )  # fmt: skip
    data = build_data(base.data, base.seed)
    spec = base.replace(algorithm={"client": {"name": algorithm, "options": options}})
    for cls in (PlainFedAvg, VmapFedAvg):
        fedavg, other = cls(base, data, torch.device("cpu")), cls(spec, data, torch.device("cpu"))
        for _ in range(2):  # SCAFFOLD's first round is FedAvg's (every control variate is still 0)
            fedavg.next_round(), other.next_round()
        a = fedavg.global_state if cls is PlainFedAvg else fedavg.weights
        b = other.global_state if cls is PlainFedAvg else other.weights
        assert any((a[k] - b[k]).abs().max() > 1e-6 for k in a), cls
        if algorithm == "scaffold":
            for k, c in other.c.items():
                assert c.abs().max() > 0
                torch.testing.assert_close(c, other.c_i[k].mean(0), atol=1e-6, rtol=1e-5)
