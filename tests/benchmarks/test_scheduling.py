"""The scheduling benchmark's simulation keeps its invariants under every policy, and is reproducible."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.sched_sim import SCALES, Measured, generate, simulate, summarise
from benchmarks.scheduling import format_table, policy_table
from orchestrator.policies import POLICIES

ROOT = Path(__file__).resolve().parents[2]
MEASURED = [Measured("tiny", 0.05, 0.1, 20.0), Measured("quickstart", 0.6, 0.05, 80.0)]
TINY = replace(SCALES["small"], name="tiny", experiments=20, users=4)


@pytest.fixture(scope="module")
def jobs():
    return generate(TINY, MEASURED, seed=1)


def test_it_generates_a_mixed_workload_over_time(jobs):
    assert len(jobs) == 20
    assert len({len(j.durations) for j in jobs}) > 3  # different lengths
    assert len({round(j.peak_mem_mb) for j in jobs}) > 10  # different sizes
    assert len({j.user for j in jobs}) > 1 and any(j.share_key.startswith("team:") for j in jobs)
    assert sorted(j.submitted for j in jobs)[-1] > 0  # submitted over time, not all at once
    assert all(j.peak_mem_mb <= 0.7 * TINY.capacity_mb + 1e-6 for j in jobs)


@pytest.mark.parametrize("policy", POLICIES)
def test_it_finishes_every_experiment_within_its_invariants(jobs, policy):
    result = simulate(jobs, policy, TINY, probe_round_seconds=0.05)
    assert set(result.finish) == {j.experiment_id for j in jobs}
    assert result.rounds_run == sum(len(j.durations) for j in jobs)
    for j in jobs:  # nothing finishes faster than its own rounds run alone
        assert result.finish[j.experiment_id] - j.submitted >= j.work * (1 - 1e-9)
    metrics = summarise(result, jobs, TINY.workers)
    assert 0 < metrics["utilisation"] <= 1
    assert 0 < metrics["jain"] <= 1
    assert metrics["p95_completion_s"] >= metrics["mean_completion_s"] > 0
    assert result.max_in_flight <= (TINY.slots if policy == "pack" else 1)


def test_it_packs_two_rounds_on_a_device_and_never_beyond_its_capacity(jobs):
    result = simulate(jobs, "pack", TINY, probe_round_seconds=0.05)
    assert result.max_in_flight == 2
    assert 0 < result.max_packed_mb <= TINY.capacity_mb * (1 - TINY.margin)


def test_it_never_packs_when_no_two_experiments_fit_together(jobs):
    big = [replace(j, peak_mem_mb=0.6 * TINY.capacity_mb) for j in jobs]
    assert simulate(big, "pack", TINY, probe_round_seconds=0.05).max_in_flight == 1


def test_it_prints_the_same_table_for_the_same_seed_and_another_for_another():
    first = format_table(policy_table(generate(TINY, MEASURED, seed=5), TINY, 0.05))
    again = format_table(policy_table(generate(TINY, MEASURED, seed=5), TINY, 0.05))
    other = format_table(policy_table(generate(TINY, MEASURED, seed=6), TINY, 0.05))
    assert first == again
    assert first != other
    assert all(f"| {p} |" in first for p in POLICIES)


@pytest.mark.slow
def test_it_runs_the_scheduling_benchmark_from_the_command_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "scheduling", "--size", "small", "--device", "cpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "scheduling-small-cpu.json").read_text())
    assert set(record["policies"]) == set(POLICIES) and record["experiments"] == 30
    assert record["scale"]["workers"] == 2
    assert all(m["mean_seconds"] > 0 and m["footprint_mb"] >= 1 for m in record["measured"])
    assert "| srtf |" in proc.stdout
