"""``python -m benchmarks scheduling --real``: the small trace run for real on a live FedWeb.

Needs a running FedWeb whose database this process can open (same ``DATABASE_URL``/settings) with its
workers up on the default queue (two CPU workers for the comparison in the README), for example
``make dev`` plus two ``celery -A fedweb worker -c 1`` processes. The policy is whatever the live dispatcher
runs (``FEDWEB_POLICY`` in the workers' and web's environment); run once per policy and compare.

Each experiment of the trace is created through the ORM at its arrival time (seconds since the start, as
in the simulation) and started with ``Experiment.start()``, exactly as the web does. Its spec is the measured
workload it was drawn from (the tiny MLP spec, or the quickstart preset at 10 clients), with the trace's
rounds and ``local.epochs`` = its size multiplier x the spec's epochs, rounded (1-12), and the trace's
priority. Owners are one benchmark user per share key (teams are not created here, so ``fair`` counts per
user). Completion time
is ``finished - queued_at`` from the database; utilisation is the recorded round seconds over
workers x makespan; fairness is Jain's index of per-user round seconds recorded while experiments were
still arriving (the contended window), a coarser measure than the simulation's.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from benchmarks.sched_sim import Job, Measured, Scale, jain

DEADLINE_S = 600.0


def _spec(job: Job, tiny: dict[str, Any]) -> dict[str, Any]:
    from workers.engine.presets import preset_spec

    spec = dict(tiny) if job.base == "tiny" else preset_spec("quickstart").to_dict()
    local = dict(spec.get("local", {}))
    local["epochs"] = int(min(12, max(1, round(job.size * local.get("epochs", 1)))))
    return {**spec, "rounds": len(job.durations), "local": local, "compute": {"device": "cpu"}}


def run_real(jobs: list[Job], scale: Scale, measured: list[Measured]) -> dict[str, Any]:
    """Submit the trace over time to the live FedWeb, wait for every experiment, read the figures back."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedweb.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from benchmarks.scheduling import TINY
    from orchestrator.models import FINISHED, Experiment, RoundMetric

    users = {}
    for key in sorted({j.share_key for j in jobs}):
        name = "bench-sched-" + key.replace(":", "-")
        users[key], _ = get_user_model().objects.get_or_create(username=name)
    t0, ids = time.time(), {}
    for job in sorted(jobs, key=lambda j: j.submitted):
        time.sleep(max(0.0, t0 + job.submitted - time.time()))
        e = Experiment.objects.create(
            owner=users[job.share_key], name=f"sched-{job.experiment_id}", spec=_spec(job, TINY),
            priority=job.priority,
        )  # fmt: skip
        e.start()
        ids[e.pk] = job
    while Experiment.objects.filter(pk__in=ids).exclude(status__in=FINISHED).exists():
        if time.time() - t0 > DEADLINE_S:
            raise TimeoutError(f"experiments still unfinished after {DEADLINE_S:.0f} s: is a worker running?")
        time.sleep(1.0)
    rows = list(Experiment.objects.filter(pk__in=ids))
    completion = np.array([(e.finished - e.queued_at).total_seconds() for e in rows])
    start = min(e.queued_at for e in rows)
    makespan = (max(e.finished for e in rows) - start).total_seconds()
    last_arrival = max(e.queued_at for e in rows)
    service: dict[int, float] = {}
    round_seconds = 0.0
    for m in RoundMetric.objects.filter(experiment_id__in=ids):
        round_seconds += m.round_seconds
        if m.recorded <= last_arrival:
            service[m.experiment.owner_id] = service.get(m.experiment.owner_id, 0.0) + m.round_seconds
    policy = os.environ.get("FEDWEB_POLICY", "fifo (default)")
    result = {
        "mean_completion_s": float(completion.mean()),
        "p95_completion_s": float(np.percentile(completion, 95)),
        "makespan_s": makespan,
        "utilisation": round_seconds / (scale.workers * makespan),
        "jain": jain(list(service.values())) if service else 1.0,
        "statuses": sorted({e.status for e in rows}),
    }
    print(f"| real ({policy}) | {result['mean_completion_s']:.1f} | {result['p95_completion_s']:.1f} "
          f"| {makespan:.1f} | {result['utilisation']:.1%} | {result['jain']:.3f} |", flush=True)  # fmt: skip
    return {
        "mode": "real",
        "device": f"live FedWeb, {scale.workers} workers assumed",
        "policy": policy,
        "wall_seconds": time.time() - t0,
        "experiments": len(rows),
        "real": result,
        "measured": [m.__dict__ for m in measured],
        "anchor": "Salus: SRTF and packing cut mean completion time vs FIFO (compare runs per FEDWEB_POLICY)",
        "anchor_ratio": None,
        "anchor_summary": f"real run under {policy}: mean completion {result['mean_completion_s']:.1f} s",
    }
