"""Scheduling policies on a shared fleet (issue 10, after Salus): ``python -m benchmarks scheduling``.

Checks Salus's claim that shortest-remaining-time-first and packing cut mean completion time substantially
against FIFO. Every policy of ``orchestrator.fleet.policies`` runs the same seeded trace; per policy it reports
mean and p95 completion time (submit -> finish), makespan, worker utilisation and Jain's fairness index.

How the traces are built (``sched_trace.generate``, seeds 0-4):

1. **Measured rounds and switches.** Two real engine workloads are run on this machine, each in a fresh
   subprocess (``fedweb_engine.simulation.runner.Simulation``, CPU): the ``quickstart`` preset (digits, CNN, 10
   clients of 100) for 3 rounds and the test suite's tiny spec (digits 8x8, MLP, 4 clients of 20) for 6
   rounds. For each: mean seconds per round and its coefficient of variation (after one warm-up round),
   the memory footprint (peak RSS during its rounds minus the RSS before the Simulation was built), and
   what a switch costs: building its dataset uncached (``data_load_s``), building its Simulation from
   nothing in a warm process (``build_s``), and building one on the already-built dataset and loading
   the round state it published (``state_load_s``).
2. **Scaling into a distribution.** Each experiment picks one measured workload at random and a size
   multiplier ``k`` log-uniform in ``[1, size_max]`` (6 small, 40 full): its round takes ``k x`` the measured
   mean, each round jittered by ``N(1, cv)`` with the measured cv; its peak memory is ``k x footprint x s``,
   with ``s`` chosen so that the largest possible experiment uses 70% of a device (2 GiB budget small, an
   H100's 80 GiB full). Rounds per experiment are log-uniform in [2, 16] (small) or [5, 120] (full).
3. **Owners and arrivals.** Owners are Zipf-distributed over 5 (small) or 40 (full) users; two of every
   three users are in a team, whose share key then counts for ``fair``. Priority is 0 (60%), 1 or 2.
   Arrivals are Poisson, with the window set so offered load = 120% of the fleet (a contended fleet, as in Salus).

The simulation (``sched_sim.simulate``) is a discrete-event fleet of N devices (2 small, 64 full), decided
at round boundaries by production's own ``orchestrator.fleet.policies.order`` and ``orchestrator.fleet.placement.place``
(the worker that holds the experiment when it has a free slot, else the shared queue, which the first
free device takes; under ``pack`` a busy device takes a second round, ``FEDWEB_PACK_SLOTS`` = 2, when
``pack_fits`` says so, 10% margin; unknown memory runs alone). What packing costs in speed is **assumed,
not measured**: a round uses a fraction ``0.2 + 0.8 sqrt(k / size_max)`` of a device's compute alone, and
rounds packed on one device share it (processor sharing). The age boost is the default 600 s; srtf's
probe estimate for an unmeasured experiment is the cheaper measured workload's mean round.

Every policy runs every seed under four switch-cost models (``sched_sim.MODELS``): ``free`` (a switch costs
nothing: the figures before issue 17), ``today`` (FedWeb before issue 17: no affinity, a switch rebuilds
from the last checkpoint and replays the rounds since), ``replay`` (affinity, but switches still replay)
and ``state`` (affinity, and a switch loads the published round state: issue 17).

Metrics (medians over the seeds; each ratio to fifo also with its min and max): utilisation = device-seconds
with a round in flight / (devices x makespan); Jain = Jain's index of the rounds in flight per user (and
per share key: team, or user without one) among all those with an experiment submitted and unfinished,
averaged over the whole run; switches = rounds run on a device that did not hold the experiment at that
round; rebuilds and replayed rounds (the replay models); switch s = the seconds switches cost.

``--real`` runs the small trace for real instead, on two local CPU workers per policy (see ``sched_real.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Options
from benchmarks.sched_sim import MODELS, SCALES, Job, Measured, Scale, generate, simulate, summarise
from benchmarks.sched_summary import format_summary, readme_figures, summarise_seeds
from orchestrator.fleet.policies import POLICIES

SEED = 0  # the --real trace's seed
SEEDS = range(5)  # the simulation's traces
ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "seed": 3,
    "rounds": 6,
    "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 20},
    "model": {"name": "mlp", "options": {"hidden": 32}},
    "participation": {"clients_per_round": 4},
    "compute": {"device": "cpu"},
}
_MEASURE = """
import json, sys, tempfile, time, psutil
from fedweb_engine.simulation import runner
from fedweb_engine.state.checkpoint import read_checkpoint, write_checkpoint
from fedweb_engine.data import cache
from fedweb_engine.spec.presets import preset_spec
from fedweb_engine.state.round_state import compact_state, complete_state
from fedweb_engine.spec.schema import Spec
base, other = sys.argv[1], json.loads(sys.argv[2])
spec = preset_spec("quickstart").replace(rounds=3, compute={"device": "cpu"}) if base == "quickstart" else Spec.from_dict(other)
before = psutil.Process().memory_info().rss / 2**20
sim = runner.Simulation(spec)
rounds = sim.run()
path = tempfile.mkdtemp() + "/state.safetensors"; write_checkpoint(path, *compact_state(sim))  # the published state
cache.shared.clear(); t0 = time.perf_counter(); runner.Simulation(spec); build = time.perf_counter() - t0  # warm process
cache.shared.clear(); t0 = time.perf_counter(); cache.shared.get(spec.data, spec.seed); data_s = time.perf_counter() - t0
t0 = time.perf_counter(); tensors, meta = read_checkpoint(path); again = runner.Simulation(spec)  # data cached
again.load_state_dict(complete_state(tensors), meta); state_s = time.perf_counter() - t0
print(json.dumps({"seconds": [r.round_seconds for r in rounds[1:]], "rss": max(r.rss_mb for r in rounds) - before,
                  "build": build, "data": data_s, "state": state_s}))
"""


def measure_base(base: str, spec: dict[str, Any] | None = None, threads: int | None = None) -> Measured:
    """Run a few real rounds of ``base`` (the quickstart preset, else ``spec``, by default the tiny one)
    in a fresh process, on ``threads`` torch threads (default: torch's), and time what a switch costs:
    building its dataset uncached, building its Simulation from nothing, and building one on cached
    data and loading a published round state; see the module docstring."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURE, base, json.dumps(spec or TINY)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=True,
    )  # fmt: skip
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    seconds = data["seconds"]
    mean = sum(seconds) / len(seconds)
    sd = (sum((s - mean) ** 2 for s in seconds) / len(seconds)) ** 0.5
    return Measured(base, mean, sd / mean, max(1.0, data["rss"]), data["data"], data["state"], data["build"])


def policy_table(
    jobs: list[Job], scale: Scale, probe: float, model: str = "free", costs: dict[str, Measured] | None = None
) -> dict[str, dict[str, float]]:
    """Every policy on the same trace under one switch-cost model (``sched_sim.MODELS``): ``{policy: metrics}``."""
    switching, affinity = MODELS[model]
    return {
        p: summarise(
            simulate(jobs, p, scale, probe, switching=switching, costs=costs, affinity=affinity), jobs, scale.workers
        )
        for p in POLICIES
    }


def format_table(rows: dict[str, dict[str, float]]) -> str:
    """One seed's Markdown table (the tests' and a quick look's)."""
    fifo = rows["fifo"]["mean_completion_s"]
    lines = [
        "| policy | mean completion s | vs fifo | p95 completion s | makespan s | utilisation | work/dev "
        "| Jain user | Jain team | switches | rebuilds | replayed rounds | switch s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p, r in rows.items():
        lines.append(
            f"| {p} | {r['mean_completion_s']:,.0f} | {r['mean_completion_s'] / fifo:.2f}x "
            f"| {r['p95_completion_s']:,.0f} | {r['makespan_s']:,.0f} | {r['utilisation']:.1%} "
            f"| {r['work_per_device_s']:.2f} | {r['jain_user']:.3f} | {r['jain_team']:.3f} | {r['switches']} "
            f"| {r['rebuilds']} | {r['replayed_rounds']} | {r['switch_seconds']:.1f} |"
        )
    return "\n".join(lines)


def run(opts: Options) -> dict[str, Any]:
    """The benchmark entry point for ``python -m benchmarks scheduling [--size small|full] [--real]``."""
    if opts.real:
        return run_real_table(opts)
    scale = SCALES[opts.size]
    reused = os.environ.get("FEDWEB_SCHED_MEASUREMENTS", "")
    # A change to the scheduler alone can be re-simulated on an earlier run's measurements (its
    # results file), so that a busy machine does not move the workloads the policies are compared on.
    measured = (
        [Measured(**m) for m in json.loads(Path(reused).read_text())["measured"]]
        if reused
        else [measure_base("tiny"), measure_base("quickstart")]
    )
    costs = {m.base: m for m in measured}
    probe = min(m.mean_seconds for m in measured)
    t0 = time.perf_counter()
    runs = {
        model: {seed: policy_table(generate(scale, measured, seed), scale, probe, model, costs) for seed in SEEDS}
        for model in MODELS
    }
    wall = time.perf_counter() - t0
    summary = summarise_seeds(runs)
    table = format_summary(summary)
    print(table, flush=True)
    srtf, pack = (summary["state"][p]["vs_fifo"]["median"] for p in ("srtf", "pack"))
    return {
        "mode": "simulation",
        "device": f"simulated {scale.workers} workers",
        "precision": opts.precision,
        "wall_seconds": wall,
        "seeds": list(SEEDS),
        "scale": scale.__dict__,
        "measured": [m.__dict__ for m in measured],
        "measured_from": reused or "this run",
        "figures": readme_figures([m.__dict__ for m in measured]),
        "probe_round_seconds": probe,
        "experiments": scale.experiments,
        "runs": runs,
        "summary": summary,
        "table": table,
        "anchor": "Salus (MLSys 2020): SRTF and packing cut mean completion time substantially vs FIFO",
        "anchor_ratio": srtf,
        "anchor_summary": f"state-load switches, median over {len(SEEDS)} seeds, mean completion vs fifo: "
        f"srtf {srtf:.2f}x, pack {pack:.2f}x",
    }


def run_real_table(opts: Options) -> dict[str, Any]:
    """``--real``: every policy on two real local CPU workers (``sched_real``), the small trace only,
    in every repeat; medians and each ratio to fifo's min-median-max over the repeats."""
    from benchmarks import sched_real

    if opts.size != "small":
        raise SystemExit("scheduling --real runs the small trace only (2 CPU workers): use --size small")
    record = sched_real.run_real(SEED, list(POLICIES))
    summary = summarise_seeds({"real": record["repeats"]})
    table = format_summary(summary, "real", models=False)
    print(table, flush=True)
    srtf, pack = (summary["real"][p]["vs_fifo"]["median"] for p in ("srtf", "pack"))
    return {
        **record,
        "command": "python -m benchmarks scheduling --real",
        "device": f"{record['workers']} local CPU workers",
        "precision": opts.precision,
        "summary": summary,
        "table": table,
        "anchor": "Salus (MLSys 2020): SRTF and packing cut mean completion time substantially vs FIFO",
        "anchor_ratio": srtf,
        "anchor_summary": f"real, median of {len(record['repeats'])} repeats, mean completion vs fifo: "
        f"srtf {srtf:.2f}x, pack {pack:.2f}x",
    }
