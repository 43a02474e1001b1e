"""``python -m benchmarks scheduling --real``: the small trace run for real, once per policy.

For every policy of ``orchestrator.policies`` a fresh FedWeb is started on this machine
(``benchmarks.fleet.LocalFleet``: its own SQLite database, two Celery CPU workers with ``--concurrency 1``
and one torch thread, ``FEDWEB_POLICY=cpu=<policy>``, the Redis at ``$REDIS_URL`` as broker), and a driver
process submits the seeded small trace (``sched_sim.generate``, seed 0, 30 experiments) through the ORM:
each experiment is created at its arrival time (seconds since the start) and started with
``Experiment.start()``, exactly as the web does; the live dispatcher and workers do the rest.

The two workloads (``BASES``) are sized for this: a round of the light MLP or the small CNN takes about
0.02-0.2 s on one thread here, and an experiment's size multiplier ``k`` (1-6) multiplies its local
epochs, so rounds run from ~0.05 to ~0.5 s plus the per-round cost of the task itself. They are measured
first (one thread) so the trace's arrival window gives the intended 120% offered load. Owners are one
benchmark user per share key (no teams are created, so ``fair`` counts per user).

Completion time is ``finished - queued_at`` from the database; utilisation is the recorded round seconds
over workers x makespan (task and dispatch overheads count as idle); fairness is Jain's index of per-user
round seconds recorded while experiments were still arriving (the contended window), a coarser measure
than the simulation's. The mean engine seconds per round is printed beside them: the policies run one
after the other, so on a shared machine a change in it between policies is the machine, not the policy. ``pack`` cannot pack here (one slot per worker, and no CPU memory budget is
configured), so it runs as fifo with unmeasured first rounds sent first to an idle worker.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np

from benchmarks.fleet import LocalFleet, bench_user, start_driver, wait_until_finished
from benchmarks.sched_sim import SCALES, Job, jain

DEADLINE_S = 240.0  # per policy
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


def run_real(seed: int, policies: list[str]) -> dict[str, Any]:
    """Measure the bases, build the small trace, run it on a fresh 2-worker fleet per policy."""
    from benchmarks.sched_sim import generate
    from benchmarks.scheduling import measure_base

    scale = SCALES["small"]
    measured = [measure_base(name, BASES[name], threads=1) for name in BASES]
    jobs = generate(scale, measured, seed)
    payload = {"jobs": [{**j.__dict__, "spec": job_spec(j)} for j in jobs]}
    t0, rows = time.time(), {}
    for policy in policies:
        print(f"scheduling --real: {policy} on {scale.workers} workers", file=sys.stderr, flush=True)
        with LocalFleet(scale.workers, {"FEDWEB_POLICY": f"cpu={policy}"}) as fleet:
            rows[policy] = fleet.drive("benchmarks.sched_real", payload, timeout=DEADLINE_S + 150)
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
        "policies": rows,
    }


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
    from orchestrator.models import Experiment, RoundMetric

    jobs = sorted(payload["jobs"], key=lambda j: j["submitted"])
    users = {key: bench_user("sched-" + key.replace(":", "-")) for key in sorted({j["share_key"] for j in jobs})}
    t0, ids = time.time(), []
    for job in jobs:
        time.sleep(max(0.0, t0 + job["submitted"] - time.time()))
        e = Experiment.objects.create(
            owner=users[job["share_key"]], name=f"sched-{job['experiment_id']}", spec=job["spec"],
            priority=job["priority"],
        )  # fmt: skip
        e.start()
        ids.append(e.pk)
    wait_until_finished(ids, t0, DEADLINE_S, 0.5)
    rows = list(Experiment.objects.filter(pk__in=ids))
    completion = np.array([(e.finished - e.queued_at).total_seconds() for e in rows])
    start = min(e.queued_at for e in rows)
    makespan = (max(e.finished for e in rows) - start).total_seconds()
    last_arrival = max(e.queued_at for e in rows)
    service: dict[int, float] = {}
    metrics = RoundMetric.objects.filter(experiment_id__in=ids).select_related("experiment")
    for m in metrics:
        if m.recorded <= last_arrival:
            service[m.experiment.owner_id] = service.get(m.experiment.owner_id, 0.0) + m.round_seconds
    round_seconds = [m.round_seconds for m in metrics]
    return {
        "mean_completion_s": float(completion.mean()),
        "p95_completion_s": float(np.percentile(completion, 95)),
        "makespan_s": makespan,
        "utilisation": sum(round_seconds) / (payload["workers"] * makespan),
        "jain": jain(list(service.values())) if service else 1.0,
        "rounds_recorded": len(round_seconds),
        "mean_round_s": float(np.mean(round_seconds)),
        "statuses": sorted({e.status for e in rows}),
    }


if __name__ == "__main__":
    print(json.dumps(drive(json.load(sys.stdin))), flush=True)
