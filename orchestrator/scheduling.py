"""Where and when rounds run. The one place that sends round tasks.

Policy for now: first come, first served per queue. Each experiment has at most one round in
flight, and each worker runs one round at a time (``--concurrency 1``), so experiments sharing a
queue interleave at round boundaries in the order their rounds were enqueued. Smarter policies
(shortest-remaining-first, fair share, packing by memory) replace ``dispatch_round``'s choice.

No round is ever lost. Every send is recorded on the experiment (``dispatched_round`` /
``dispatched_at``) with a conditional UPDATE, so of several senders racing for the same round
(the worker that recorded the previous one, a redelivered copy of it, a reconciler) exactly one
sends. ``reconcile()`` runs in every worker's heartbeat and re-sends the next round of any active
experiment whose round was never sent, whose holder died (its lease ran out), or whose message
sat unclaimed for too long. A duplicate message is harmless: the claim stays the arbiter.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from fedweb.celery import app
from orchestrator.fleet import Worker, queue_name
from orchestrator.models import ACTIVE, Experiment

log = logging.getLogger(__name__)

ROUND_TASK = "workers.tasks.run_round"  # sent by name: scheduling never imports the worker code


def dispatch_round(experiment, round_number: int, *, force: bool = False, sent_at=None) -> bool:
    """Send ``round_number`` of an active experiment to its queue, unless it was already sent.

    ``force`` sends again even if it was (resume, where an earlier copy may have been lost);
    ``sent_at`` sends again only if the last send is still the one made at that time (the
    reconciler: of several reconcilers noticing the same lost round, one re-sends it).
    Returns whether this call sent it.
    """
    rows = Experiment.objects.filter(
        pk=experiment.pk, status__in=ACTIVE, current_round=round_number - 1, total_rounds__gte=round_number
    )
    if sent_at is not None:
        rows = rows.filter(dispatched_at=sent_at)
    elif not force:
        rows = rows.filter(dispatched_round__lt=round_number)
    if not rows.update(dispatched_round=round_number, dispatched_at=timezone.now()):
        return False
    _send(experiment.pk, round_number, experiment.queue or queue_name("cpu"))
    return True


def dispatch_next(experiment) -> bool:
    """Send the round after the last recorded one (after a round, or for a redelivered copy)."""
    return dispatch_round(experiment, experiment.current_round + 1)


def _send(experiment_id: int, round_number: int, queue: str) -> None:
    try:
        app.send_task(ROUND_TASK, (experiment_id, round_number), queue=queue)
    except Exception:  # broker away: the send is recorded, so the reconciler sends it again later
        log.warning("could not send round %s of experiment %s", round_number, experiment_id, exc_info=True)


def reconcile(now=None) -> list[tuple[int, int]]:
    """Re-send the next round of every active experiment that is stuck; returns what was sent.

    Stuck means no live process holds its next round and one of: the round was never sent (a
    worker died between recording a round and sending the next), its holder died (the lease ran
    out: heartbeats renew it while the process lives), or its message went unclaimed for
    ``WORKER_LOST_AFTER`` while a worker serving its queue sat idle (so it is not waiting in the
    queue: a worker died after taking it but before claiming it), or for ``ROUND_RESEND_AFTER``
    whatever the queue (lost by the broker).
    """
    now = now or timezone.now()
    held = Q(claimed_round__gt=F("current_round"), lease_expires__gte=now)
    idle_queues = _idle_queues()
    sent = []
    for e in Experiment.objects.filter(status__in=ACTIVE).exclude(queue="inline").exclude(held):
        if e.current_round >= e.total_rounds:  # its worker died between the last round and completing it
            e.complete()
            continue
        nxt = e.current_round + 1
        waited = (now - e.dispatched_at).total_seconds() if e.dispatched_at else float("inf")
        if e.dispatched_round < nxt:
            why = "was never sent"
        elif e.claimed_round == nxt and e.lease_expires is not None and e.dispatched_at < e.lease_expires:
            why = f"was held by {e.worker}, which stopped answering"
        elif waited > settings.WORKER_LOST_AFTER and e.queue in idle_queues:
            why = f"was not taken by the idle workers of '{e.queue}'"
        elif waited > settings.ROUND_RESEND_AFTER:
            why = "waited unclaimed too long"
        else:
            continue
        if dispatch_round(e, nxt, sent_at=e.dispatched_at) if e.dispatched_round >= nxt else dispatch_round(e, nxt):
            e.log("warning", f"Round {nxt} {why}; sent it again")
            sent.append((e.pk, nxt))
    return sent


def _idle_queues() -> set[str]:
    """Queues with a live worker that is running no round right now."""
    return {q for w in Worker.live().filter(current_experiment__isnull=True) for q in w.serve_queues()}


def renew_leases(hostname: str, pids: list[int]) -> int:
    """Extend the leases of the rounds that ``hostname``'s live processes ``pids`` are running."""
    expires = timezone.now() + timedelta(seconds=settings.WORKER_LOST_AFTER)
    return Experiment.objects.filter(worker=hostname, claim_pid__in=pids, claimed_round__gt=F("current_round")).update(
        lease_expires=expires
    )
