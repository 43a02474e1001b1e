"""``python -m benchmarks scheduling --real``: the small trace run for real, every policy in every repeat.

For every policy of ``orchestrator.fleet.policies`` a fresh FedWeb is started on this machine
(``benchmarks.fleet.LocalFleet``: its own SQLite database, two Celery CPU workers with one torch thread,
``FEDWEB_POLICY=cpu=<policy>``, the Redis at ``$REDIS_URL`` as broker), and a driver process submits the
seeded small trace (``sched_trace.generate``, seed 0, 30 experiments) through the ORM: each experiment is
created at its arrival time (seconds since the start) and started with ``Experiment.start()``, exactly as
the web does; the live dispatcher and workers do the rest. Each repeat (``REPEATS``) runs every policy,
fifo (the control) included, so each ratio to fifo is taken within one repeat.

``pack`` really packs: its workers run ``--concurrency 2`` with ``FEDWEB_PACK_CAPACITY_MB`` set
(``PACK_CAPACITY_MB``), so two measured rounds whose resident memory fits share a worker.

The two workloads (``BASES``) are sized for this: a round of the light MLP or the small CNN takes about
0.02-0.2 s on one thread on a quiet machine, and an experiment's size multiplier ``k`` (1-6) multiplies
its local epochs. They are measured first (one thread) so the trace's arrival window gives the intended
120% offered load. Each user of the trace is a benchmark user, and the trace's teams are real teams
(two of three users are in one), so ``fair`` counts per team as in the simulation.

The figures are read back from the database and the runs' logs (``sched_real_metrics``): the same
columns as the simulation, switches and their seconds included. The mean engine seconds per round is
printed beside them: on a shared machine a change in it between policies is the machine, not the policy.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from benchmarks import sched_real_metrics
from benchmarks.fleet import LocalFleet, bench_user, start_driver, wait_until_finished
from benchmarks.sched_sim import SCALES, Job
from orchestrator.fleet import policies

DEADLINE_S = 600.0  # per policy (a loaded machine runs the trace several times slower)
REPEATS = 2
# pack on CPU: two worker processes per worker, and a budget two rounds' measured RSS fit in (a
# round's worker process holds ~300-500 MB here, interpreter and torch included).
PACK_SLOTS = 2
PACK_CAPACITY_MB = 2400
BASES = {
    "light": {
        "seed": 3, "rounds": 6,
        "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 20},
        "model": {"name": "mlp", "options": {"hidden": 64}},
        "participation": {"clients_per_round": 8},
        "local": {"epochs": 4},
        "compute": {"device": "cpu"},
    },
    "cnn": {
        "seed": 3, "rounds": 6,
        "data": {"name": "digits", "options": {"image_size": 28}, "num_clients": 40},
        "model": {"name": "cnn"},
        "participation": {"clients_per_round": 2},
        "local": {"epochs": 1},
        "compute": {"device": "cpu"},
    },
}  # fmt: skip


def job_spec(job: Job) -> dict[str, Any]:
    """The job's workload, its rounds and its size multiplier applied to the local epochs."""
    spec = BASES[job.base]
    epochs = max(1, round(job.size * spec["local"]["epochs"]))
    return {**spec, "rounds": len(job.durations), "local": {**spec["local"], "epochs": epochs}}


def run_real(seed: int, policies: list[str], repeats: int = REPEATS) -> dict[str, Any]:
    """Measure the bases, build the small trace, run it on a fresh 2-worker fleet per policy, ``repeats``
    times, every policy (fifo, the control, included) in each repeat."""
    from benchmarks.sched_sim import generate
    from benchmarks.scheduling import measure_base

    scale = SCALES["small"]
    measured = [measure_base(name, BASES[name], threads=1) for name in BASES]
    jobs = generate(scale, measured, seed)
    payload = {"jobs": [{**j.__dict__, "spec": job_spec(j)} for j in jobs]}
    t0, repeats_rows = time.time(), {}
    for repeat in range(repeats):
        rows = {}
        for policy in policies:
            print(f"scheduling --real: repeat {repeat + 1}, {policy} on {scale.workers} workers", file=sys.stderr)
            with LocalFleet(
                scale.workers, fleet_env(policy), concurrency=PACK_SLOTS if policies.get(policy).packs else 1
            ) as fleet:
                rows[policy] = fleet.drive("benchmarks.sched_real", payload, timeout=DEADLINE_S + 150)
        repeats_rows[repeat] = rows
    return {
        "mode": "real",
        "workers": scale.workers,
        "wall_seconds": time.time() - t0,
        "seed": seed,
        "experiments": len(jobs),
        "rounds": sum(len(j.durations) for j in jobs),
        "arrival_window_s": max(j.submitted for j in jobs),
        "measured": [m.__dict__ for m in measured],
        "bases": BASES,
        "pack": {"FEDWEB_PACK_CAPACITY_MB": PACK_CAPACITY_MB, "concurrency": PACK_SLOTS},
        "repeats": repeats_rows,
        "policies": repeats_rows[0],
    }


def fleet_env(policy: str) -> dict[str, str]:
    """The fleet's settings for ``policy``: under pack, a CPU memory budget, so it really packs."""
    env = {"FEDWEB_POLICY": f"cpu={policy}"}
    if policies.get(policy).packs:
        env |= {"FEDWEB_PACK_CAPACITY_MB": str(PACK_CAPACITY_MB), "FEDWEB_PACK_SLOTS": str(PACK_SLOTS)}
    return env


def format_table(rows: dict[str, dict[str, float]]) -> str:
    fifo = rows["fifo"]["mean_completion_s"] if "fifo" in rows else None
    lines = [
        "| policy | mean completion s | vs fifo | p95 completion s | makespan s | utilisation | Jain | mean round s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p, r in rows.items():
        ratio = f"{r['mean_completion_s'] / fifo:.2f}x" if fifo else "-"
        lines.append(
            f"| {p} | {r['mean_completion_s']:.1f} | {ratio} | {r['p95_completion_s']:.1f} | {r['makespan_s']:.1f} "
            f"| {r['utilisation']:.1%} | {r['jain']:.3f} | {r.get('mean_round_s', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def drive(payload: dict[str, Any]) -> dict[str, Any]:
    """In the fleet's environment: submit the trace over time, wait for every experiment, read it back."""
    start_driver(payload)
    from accounts.models import Membership, Team
    from orchestrator.experiments.launch import create_experiment

    jobs = sorted(payload["jobs"], key=lambda j: j["submitted"])
    users = {u: bench_user("sched-" + u.replace(":", "-")) for u in sorted({j["user"] for j in jobs})}
    teams = {}
    for job in jobs:
        if job["share_key"].startswith("team:") and job["share_key"] not in teams:
            teams[job["share_key"]] = Team.objects.create(name="sched-" + job["share_key"].replace(":", "-"))
        if job["share_key"] in teams:
            Membership.objects.get_or_create(team=teams[job["share_key"]], user=users[job["user"]])
    t0, ids = time.time(), []
    for job in jobs:
        time.sleep(max(0.0, t0 + job["submitted"] - time.time()))
        e = create_experiment(
            owner=users[job["user"]], team=teams.get(job["share_key"]), name=f"sched-{job['experiment_id']}",
            spec=job["spec"], priority=job["priority"], start=False,
        )  # fmt: skip
        e.start()
        ids.append(e.pk)
    wait_until_finished(ids, t0, DEADLINE_S, 0.5)
    return sched_real_metrics.read_back(ids, payload["workers"])


if __name__ == "__main__":
    print(json.dumps(drive(json.load(sys.stdin))), flush=True)
