"""Gangs: workers recruited as ranks 1..N-1 of another worker's distributed rounds.

A round of an experiment with ``compute.ranks`` > 1 goes to one worker like any round (its
*leader*, rank 0: placement and affinity as usual). When the leader owns fewer devices than ranks
asked for, it recruits idle live workers of the same queue (:func:`recruit`: a compare-and-swap per
worker on its ``current_experiment``, so two leaders never take the same one), records them as a
:class:`Gang` and sends each a ``serve_rank`` task through its own queue. The members then serve
rounds while the leader holds the experiment; their slots count as taken for the scheduler
(:func:`busy_members`), and the Workers page lists the gang.

The gang ends when the leader closes its hold (the run ends, pauses, the policy sends the leader
something else, or a rank failed): :func:`dissolve` deletes the row and frees any member that never
started. A leader that dies leaves a row the reconciler removes (:func:`reconcile`), and its
members leave on their own when the leader's store goes away.
"""

from __future__ import annotations

import logging

from celery import current_app as app  # the Celery app (fedweb.celery), by name: the domain imports no glue
from celery.utils.nodenames import worker_direct
from django.apps import apps
from django.db import models
from django.db.models import F, Q
from django.utils import timezone

from fedweb_engine.components.provenance import missing
from orchestrator.experiments.states import ACTIVE
from orchestrator.fleet.workers import Worker

log = logging.getLogger(__name__)

RANK_TASK = "workers.tasks.serve_rank"  # sent by name, like rounds


class Gang(models.Model):
    """The members (ranks 1..N-1) a leader recruited for an experiment's distributed rounds."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="gangs")
    leader = models.CharField(max_length=255)  # rank 0's worker
    members = models.JSONField(default=list)  # worker hostnames, rank 1 first
    address = models.CharField(max_length=255)  # host:port of the leader's store
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created"]

    def __str__(self) -> str:
        return f"gang of {self.leader} for experiment {self.experiment_id}: {', '.join(self.members)}"

    @property
    def ranks(self) -> int:
        return 1 + len(self.members)


def recruit(experiment, leader: str, want: int, *, exclude: set[str] = frozenset()) -> list[str]:
    """Reserve up to ``want`` idle live workers of the experiment's queue (with its plugins) as its
    members; returns their hostnames. An idle worker runs no round, holds no claim, was sent nothing
    and is in no gang; each is taken with a conditional UPDATE, so racing leaders never share one."""
    busy = _busy_hosts()
    taken = []
    for w in Worker.live().filter(current_experiment__isnull=True).exclude(hostname=leader).order_by("hostname"):
        if len(taken) >= want:
            break
        if experiment.queue not in w.serve_queues() or w.hostname in busy or w.hostname in exclude:
            continue
        if experiment.plugins and missing(experiment.plugins, w.plugins or []):
            continue
        if Worker.objects.filter(pk=w.pk, current_experiment__isnull=True).update(current_experiment=experiment):
            taken.append(w.hostname)
    return taken


def form(experiment, leader: str, members: list[str], address: str) -> Gang:
    """Record the gang and send each member its rank (its own queue: only it may take the task)."""
    gang = Gang.objects.create(experiment=experiment, leader=leader, members=members, address=address)
    for rank, hostname in enumerate(members, start=1):
        try:
            app.send_task(RANK_TASK, (experiment.pk, gang.pk, rank, gang.ranks, address), queue=worker_direct(hostname))
        except Exception:  # broker away: the member never comes, and the group does not form in time
            log.warning("could not send rank %s of gang %s to %s", rank, gang.pk, hostname, exc_info=True)
    return gang


def dissolve(gang_id: int) -> None:
    """End a gang: its row goes, and members still reserved for it (one whose task never started)
    are free again. A member serving it frees itself as it leaves."""
    gang = Gang.objects.filter(pk=gang_id).first()
    if gang is None:
        return
    Worker.objects.filter(hostname__in=gang.members, current_experiment_id=gang.experiment_id).update(
        current_experiment=None
    )
    gang.delete()


def is_member(gang_id: int, experiment_id: int, hostname: str) -> bool:
    gang = Gang.objects.filter(pk=gang_id, experiment_id=experiment_id).first()
    return gang is not None and hostname in gang.members


def busy_members(queue: str) -> list[str]:
    """Hostnames serving (or reserved for) a gang of ``queue``'s experiments: their slots are taken."""
    rows = Gang.objects.filter(experiment__queue=queue).values_list("members", flat=True)
    return [h for members in rows for h in members]


def role_of(hostname: str, gangs: list[Gang] | None = None) -> dict | None:
    """A worker's place in a gang, for the Workers page: its rank, the gang's size, its leader and
    members; None when it is in none."""
    for gang in Gang.objects.all() if gangs is None else gangs:
        if hostname == gang.leader or hostname in gang.members:
            rank = 0 if hostname == gang.leader else gang.members.index(hostname) + 1
            return {"rank": rank, "ranks": gang.ranks, "leader": gang.leader, "members": gang.members}
    return None


def reconcile() -> int:
    """Remove gangs whose leader stopped answering or whose experiment is no longer active; returns
    how many. Their members leave on their own (the leader's store is gone, or it closes)."""
    live = set(Worker.live().values_list("hostname", flat=True))
    stale = Gang.objects.filter(~Q(leader__in=live) | ~Q(experiment__status__in=ACTIVE))
    ids = list(stale.values_list("pk", flat=True))
    for gang_id in ids:
        dissolve(gang_id)
    return len(ids)


def forget_leader(hostname: str) -> None:
    """A worker restarted under this name holds no gang, whatever its dead self led."""
    for gang_id in Gang.objects.filter(leader=hostname).values_list("pk", flat=True):
        dissolve(gang_id)


def _busy_hosts() -> set[str]:
    """Workers holding or sent a round, or in a gang: not idle, whatever their row says."""
    Experiment = apps.get_model("orchestrator", "Experiment")  # the models module imports this one
    now = timezone.now()
    held = Q(claimed_round__gt=F("current_round"), lease_expires__gte=now)
    rows = Experiment.objects.filter(held).values_list("worker", flat=True)
    sent = Experiment.objects.filter(dispatched_round__gt=F("current_round")).values_list("dispatched_to", flat=True)
    members = {h for ms in Gang.objects.values_list("members", flat=True) for h in ms}
    return {h for h in [*rows, *sent] if h} | members
