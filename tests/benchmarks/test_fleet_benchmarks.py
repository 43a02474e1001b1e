"""The benchmarks that start real workers (``shards``, ``scheduling --real``): their set-up and records,
never their timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS, NOT_IN_ALL
from benchmarks.sched_real import BASES, format_table, job_spec
from benchmarks.sched_sim import Job

ROOT = Path(__file__).resolve().parents[2]


def _job(base: str, size: float, rounds: int) -> Job:
    return Job(1, "user:0", "user:0", 0, 0.0, (0.1,) * rounds, 10.0, 0.5, base=base, size=size)


def test_it_gives_a_real_job_its_rounds_and_local_epochs_scaled_by_its_size():
    spec = job_spec(_job("light", 2.6, rounds=7))
    assert spec["rounds"] == 7
    assert spec["local"]["epochs"] == round(2.6 * BASES["light"]["local"]["epochs"])
    assert spec["model"] == BASES["light"]["model"]
    assert job_spec(_job("cnn", 1.2, rounds=2))["local"]["epochs"] == 1  # never below one epoch


def test_it_prints_each_policy_against_fifo():
    row = {"mean_completion_s": 10.0, "p95_completion_s": 20.0, "makespan_s": 30.0, "utilisation": 0.5, "jain": 0.9,
           "mean_round_s": 0.25}  # fmt: skip
    table = format_table({"fifo": row, "srtf": {**row, "mean_completion_s": 7.5}})
    assert "| fifo | 10.0 | 1.00x | 20.0 | 30.0 | 50.0% | 0.900 | 0.25 |" in table
    assert "| srtf | 7.5 | 0.75x |" in table


def test_it_registers_the_fleet_benchmarks_but_leaves_them_out_of_all():
    assert {"shards", "viewers", "e2e_overhead"} <= set(BENCHMARKS)
    assert NOT_IN_ALL == {
        "shards", "recovery", "socket_close", "viewers", "client_log", "e2e_overhead", "algorithms", "client_state",
        "ingest_live",
    }  # fmt: skip


def test_it_names_redis_url_when_a_fleet_benchmark_has_no_broker(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "shards", "--size", "small"],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "set REDIS_URL" in proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.integration
def test_it_runs_every_shard_configuration_on_real_workers_to_the_same_model(redis_url, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path), "REDIS_URL": redis_url}
    env.pop("CELERY_BROKER_URL", None)
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "shards", "--size", "small"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "shards-small-cpu.json").read_text())
    configs = record["configs"]
    assert list(configs) == [
        "1 worker, unsharded", "1 worker, 2 shards", "1 worker, 4 shards", "2 workers, 2 shards", "4 workers, 4 shards",
    ]  # fmt: skip
    reference = configs["1 worker, unsharded"]
    for row in configs.values():
        assert row["rounds"] == 3 and row["seconds_per_round"] > 0 and row["worker_cpu_seconds_per_round"] > 0
        assert row["final_test_accuracy"] == pytest.approx(reference["final_test_accuracy"], abs=0.02)
    assert set(record["overhead_seconds_per_round"]) == {"2", "4"}  # JSON keys
    assert configs["1 worker, 4 shards"]["verdict"] == "control" and "verdict" in configs["2 workers, 2 shards"]
    assert "| 2 workers, 2 shards |" in proc.stdout


def test_a_fleet_inside_the_no_parallelism_controls_spread_is_no_measurable_difference(capsys):
    from benchmarks.common import Options
    from benchmarks.shards import CONFIGS, config_label, summarise

    def repeat(speedups: dict[tuple[int, int], float]) -> dict[str, dict]:
        row = {"rounds": 8, "worker_cpu_seconds_per_round": 3.0, "load_average_before": 1.0}
        return {config_label(*c): row | {"speedup": s, "seconds_per_round": 4.0 / s} for c, s in speedups.items()}

    # The control "1 worker, 4 shards" moves 1.0-1.33x with no extra core; 2 workers' 1.26x is inside that.
    reps = [
        repeat({(1, 1): 1.0, (1, 2): 1.01, (1, 4): 1.33, (2, 2): 1.26, (4, 4): 1.9}),
        repeat({(1, 1): 1.0, (1, 2): 0.98, (1, 4): 1.10, (2, 2): 1.20, (4, 4): 1.7}),
        repeat({(1, 1): 1.0, (1, 2): 1.05, (1, 4): 1.20, (2, 2): 1.30, (4, 4): 1.8}),
    ]
    assert [config_label(*c) for c in CONFIGS] == list(reps[0])
    record = summarise(reps, Options(size="full"), 1.0, {})
    configs = record["configs"]
    assert record["control_speedup_spread"] == {"min": 0.98, "max": 1.33}
    assert configs["2 workers, 2 shards"]["verdict"] == "no measurable difference"
    assert configs["4 workers, 4 shards"]["verdict"] == "faster"
    assert configs["4 workers, 4 shards"]["speedup_spread"]["min"] == 1.7
    assert "2 workers 1.26x (no measurable difference)" in record["anchor_summary"]
    assert "| no measurable difference |" in capsys.readouterr().out
