"""The Workers page and its JSON: the queues, each worker with its current experiment shown only
to those who may read it, the gangs of distributed runs, and where recent rounds ran (of the
experiments the viewer may read)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from orchestrator.experiments.access import visible_ids
from orchestrator.fleet.gangs import Gang, role_of
from orchestrator.fleet.queues import queue_states
from orchestrator.fleet.shares import current_shares, half_life_hours
from orchestrator.fleet.worker_rounds import RECENT_MINUTES, recent_rounds
from orchestrator.fleet.workers import Worker


def _workers_for(user) -> list[dict]:
    workers = list(Worker.objects.select_related("current_experiment"))
    visible = visible_ids(user, [w.current_experiment_id for w in workers])  # the workers socket's rule too
    gangs = list(Gang.objects.all())
    rows = []
    for w in workers:
        current = w.current_experiment if w.current_experiment_id in visible else None
        rows.append(
            {
                "hostname": w.hostname,
                "queue": w.queue,
                "devices": w.devices,
                "plugins": w.plugins or [],
                "last_heartbeat": w.last_heartbeat.isoformat(),
                "seconds_ago": max(0, int((timezone.now() - w.last_heartbeat).total_seconds())),
                "lost": w.is_lost,
                "current_experiment": {"id": current.pk, "name": current.name} if current else None,
                "busy": w.current_experiment_id is not None,
                "gang": role_of(w.hostname, gangs),
            }
        )
    return rows


def _gangs_for(user) -> list[dict]:
    """The gangs holding an experiment now: their ranks' workers, and the experiment if ``user`` may read it."""
    gangs = list(Gang.objects.select_related("experiment"))
    visible = visible_ids(user, [g.experiment_id for g in gangs])
    return [
        {
            "leader": g.leader, "members": g.members, "ranks": g.ranks, "since": g.created.isoformat(),
            "experiment": {"id": g.experiment_id, "name": g.experiment.name} if g.experiment_id in visible else None,
        }
        for g in gangs
    ]  # fmt: skip


@login_required
def worker_list(request: HttpRequest) -> HttpResponse:
    queues = queue_states(broker=True)
    ctx = {
        "workers": _workers_for(request.user),
        "gangs": _gangs_for(request.user),
        "queues": queues,
        "shares": current_shares(request.user, [q.name for q in queues]),
        "half_life_hours": half_life_hours(),
        "recent_rounds": recent_rounds(request.user),
        "recent_minutes": RECENT_MINUTES,
    }
    return render(request, "orchestrator/worker_list.html", ctx)


@login_required
def worker_list_json(request: HttpRequest) -> JsonResponse:
    queues = [q.to_dict() for q in queue_states(broker=True)]
    body = {
        "workers": _workers_for(request.user), "gangs": _gangs_for(request.user), "queues": queues,
        "recent_rounds": recent_rounds(request.user),
    }  # fmt: skip
    return JsonResponse(body)
