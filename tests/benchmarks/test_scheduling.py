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
from orchestrator.fleet.policies import POLICIES

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
    assert 0 < metrics["jain_user"] <= 1 and 0 < metrics["jain_team"] <= 1
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


@pytest.mark.parametrize("policy", POLICIES)
def test_a_switch_costs_what_its_model_says(jobs, policy):
    costs = {m.base: replace(m, data_load_s=0.5, state_load_s=0.25, build_s=1.0) for m in MEASURED}
    free = simulate(jobs, policy, TINY, 0.05, switching="free", costs=costs)
    state = simulate(jobs, policy, TINY, 0.05, switching="state", costs=costs)
    replay = simulate(jobs, policy, TINY, 0.05, switching="replay", costs=costs)
    assert free.switch_seconds == 0 and free.rebuilds == 0
    assert state.rebuilds == 0 and state.replayed_rounds == 0
    assert state.switches == 0 or 0.25 * state.switches <= state.switch_seconds <= 0.75 * state.switches + 1e-9
    assert replay.rebuilds == replay.switches and replay.switch_seconds >= 1.0 * replay.switches


def test_it_replays_the_rounds_since_the_last_checkpoint_on_a_switch():
    from benchmarks.sched_sim import _Device, _Fleet

    job = generate(TINY, MEASURED, seed=1)[0]
    costs = {m.base: replace(m, build_s=1.0) for m in MEASURED}
    fleet = _Fleet([job], "fifo", TINY, 0.05, switching="replay", costs=costs)
    fleet.done[job.experiment_id] = min(12, len(job.durations) - 1)
    done = fleet.done[job.experiment_id]
    cost = fleet.switch_cost(_Device("w9"), job)
    since = done // 10 * 10
    assert fleet.result.replayed_rounds == done - since
    assert cost == pytest.approx(1.0 + sum(job.durations[since:done]))


@pytest.mark.slow
def test_it_runs_the_scheduling_benchmark_from_the_command_line(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "scheduling", "--size", "small", "--device", "cpu"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "scheduling-small-cpu.json").read_text())
    assert set(record["summary"]["state"]) == set(POLICIES) and record["experiments"] == 30
    assert len(record["seeds"]) >= 5 and set(record["summary"]) == {"free", "today", "replay", "state"}
    assert all(m["state_load_s"] > 0 and m["data_load_s"] > 0 for m in record["measured"])
    assert record["scale"]["workers"] == 2
    assert all(m["mean_seconds"] > 0 and m["footprint_mb"] >= 1 for m in record["measured"])
    assert "| srtf |" in proc.stdout
