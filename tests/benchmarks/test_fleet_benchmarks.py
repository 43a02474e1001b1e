"""The benchmarks that start real processes (``distributed``, ``scheduling --real``): their set-up and
records, never their timings."""

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
    assert {"distributed", "viewers", "e2e_overhead"} <= set(BENCHMARKS)
    assert NOT_IN_ALL == {
        "distributed", "recovery", "socket_close", "viewers", "client_log", "e2e_overhead", "algorithms", "client_state",
        "ingest_live", "search", "web_startup", "runs_table",
    }  # fmt: skip


def test_it_names_redis_url_when_a_fleet_benchmark_has_no_broker(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "recovery", "--size", "small"],
        cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path)},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "set REDIS_URL" in proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
def test_the_distributed_benchmark_runs_both_workloads_on_one_and_two_ranks(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "distributed", "--size", "small", "--device", "cpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "distributed-small-cpu.json").read_text())
    assert set(record["workloads"]) == {"heavy", "light"}
    for name, w in record["workloads"].items():
        assert list(w["runs"]) == ["1 rank, 1 thread", "1 rank, 2 threads", "2 ranks, 1 thread each"]
        two = w["runs"]["2 ranks, 1 thread each"][0]
        assert len(two["rank_train_seconds"]) == 2 and two["allreduce_seconds"] >= 0 and two["setup_seconds"] >= 0
        losses = list(w["final_train_loss"].values())
        assert max(losses) - min(losses) < 1e-4, (name, losses)  # the same run, whatever the ranks
        assert w["speedup_2_ranks"]["median"] > 0 and len(w["load_1min"]) == 6
    assert "| heavy |" in proc.stdout and "| light |" in proc.stdout


def test_the_baseline_is_the_faster_one_rank_run_of_each_repeat():
    from benchmarks.distributed import CONFIGS, _summarise

    def runs(one_1: list[float], one_2: list[float], two: list[float]) -> dict[str, list[dict]]:
        row = {"allreduce_seconds": 0.005, "setup_seconds": 0.1, "members_built_seconds": 2.0, "final_train_loss": 1.0,
               "load_1min": [0.5, 0.7]}  # fmt: skip
        return {label: [{**row, "seconds_per_round": s, "rank_train_seconds": [0.8 * s, 0.9 * s] if n == 2 else None}
                        for s in seconds]
                for (label, n, _), seconds in zip(CONFIGS, (one_1, one_2, two), strict=True)}  # fmt: skip

    w = _summarise("heavy", runs([2.0, 2.0, 2.2], [1.5, 2.5, 2.0], [1.0, 1.25, 1.1]))
    assert w["speedup_2_ranks"]["values"] == [1.5, 1.6, 2.0 / 1.1]  # 1.5/1.0, 2.0/1.25, 2.0/1.1
    assert w["meets_goal"] is True and w["speedup_2_ranks"]["crosses_1"] is False
    # Where the time goes: a second thread's gain, a rank's half against half a 1-thread round, the rest.
    assert w["threads_gain_1_rank"]["values"] == [2.0 / 1.5, 2.0 / 2.5, 2.2 / 2.0]
    assert w["rank_train_vs_half_of_1_thread"]["values"] == pytest.approx([0.85, 1.0625, 0.85])
    assert w["seconds_beyond_slowest_rank_median"] == pytest.approx(0.11)  # 1.1 - 0.9 * 1.1, the median of 0.1 s
    slow = _summarise("light", runs([1.0, 1.0, 1.0], [1.2, 1.2, 1.2], [1.1, 0.9, 1.05]))
    assert slow["speedup_2_ranks"]["crosses_1"] is True and "crosses 1.0" in slow["summary"]
