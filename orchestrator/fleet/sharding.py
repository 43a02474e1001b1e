"""Shards of a round (``compute.shards``): their rows, claims, leases and recovery.

A sharded round starts like any other: ``run_round`` claims it (the round's lease, held by that
process as usual) and, instead of training, calls :func:`fan_out`, which creates one
:class:`RoundShard` row per shard and sends a ``run_shard`` task for each to the queue, where any
worker takes it. A shard is claimed like a round (a conditional UPDATE: a live lease refuses a
second copy), its lease renewed by its worker's heartbeat while the process lives; a finished
shard writes its partial sum to a file and is marked done, and the one that finds every shard done
concludes the round (``advance`` stays the arbiter of recording it exactly once).

Recovery reuses the round's rules (:func:`reconcile`, from ``scheduling.reconcile``): a shard
whose holder died (lease ran out) or whose message went unclaimed too long is sent again, and so
is a done shard whose holder died before concluding the round when every shard is done: its
redelivery skips the training and concludes. Only the dead shard's work is repeated.

A run with plugins (``Experiment.plugins``) sends each shard to the own queue of a live worker
that has them at the recorded hash, spread by shard index (as ``scheduling`` does for its rounds),
and, when none is live, to the worker that claimed the round: it passed the round task's check.
"""

from __future__ import annotations

import logging
import shutil
from datetime import timedelta
from pathlib import Path

from celery import current_app as app  # the Celery app (fedweb.celery), by name: the domain imports no glue
from celery.utils.nodenames import worker_direct
from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from orchestrator.experiments.records import checkpoint_folder
from orchestrator.experiments.states import ACTIVE
from orchestrator.fleet.workers import Worker, queue_name
from workers.engine.provenance import missing

log = logging.getLogger(__name__)

SHARD_TASK = "workers.tasks.run_shard"  # sent by name, like rounds


class RoundShard(models.Model):
    """One shard of one round of a sharded experiment; deleted once the round is recorded."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="round_shards")
    round = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    of = models.PositiveIntegerField()  # the round's shard count (fixed when the round fans out)
    worker = models.CharField(max_length=255, blank=True)
    claim_pid = models.IntegerField(null=True, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    done = models.BooleanField(default=False)  # its partial sum is on disk
    dispatched_at = models.DateTimeField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["experiment", "round", "index"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round", "index"], name="one_row_per_shard")]


def shard_count(experiment) -> int:
    """The spec's shard count; ``auto`` (0) is one per live worker slot of the experiment's queue."""
    n = experiment.parsed_spec().compute.shards
    if n == 0:
        n = sum(w.slots for w in Worker.live() if experiment.queue in w.serve_queues())
    return max(1, n)


def is_sharded(experiment) -> bool:
    return experiment.queue != "inline" and experiment.parsed_spec().compute.shards != 1


def partial_path(experiment_id: int, round_number: int, index: int) -> Path:
    """Where shard ``index``'s partial sum lives: beside the checkpoints, where every worker reads."""
    return checkpoint_folder(experiment_id) / "shards" / f"round-{round_number:06d}" / f"shard-{index:03d}.safetensors"


def fan_out(experiment, round_number: int) -> list[int]:
    """Create the round's shard rows (once) and send every shard that no live process holds and
    that is not done (or, when all are done, the last: its redelivery concludes the round)."""
    n = shard_count(experiment)
    for k in range(n):
        RoundShard.objects.get_or_create(experiment=experiment, round=round_number, index=k, defaults={"of": n})
    rows = list(RoundShard.objects.filter(experiment=experiment, round=round_number))
    now = timezone.now()
    todo = [r for r in rows if not r.done] or rows[-1:]
    return [r.index for r in todo if not _held(r, now) and _send(experiment, r, sent_at=r.dispatched_at)]


def _shard_queue(experiment, index: int, queue: str):
    """The shared queue, or for a run with plugins an eligible worker's own queue."""
    if not experiment.plugins:
        return queue
    eligible = sorted(
        w.hostname for w in Worker.live() if queue in w.serve_queues() and not missing(experiment.plugins, w.plugins)
    )
    return worker_direct(eligible[index % len(eligible)] if eligible else experiment.worker)


def _held(row: RoundShard, now) -> bool:
    return row.lease_expires is not None and row.lease_expires >= now


def _send(experiment, row: RoundShard, *, sent_at) -> bool:
    """Send ``row``'s task unless another sender did since ``sent_at`` (of racing senders, one sends)."""
    if not RoundShard.objects.filter(pk=row.pk, dispatched_at=sent_at).update(dispatched_at=timezone.now()):
        return False
    try:
        args = (experiment.pk, row.round, row.index)
        app.send_task(
            SHARD_TASK, args, queue=_shard_queue(experiment, row.index, experiment.queue or queue_name("cpu"))
        )
    except Exception:  # broker away: recorded as sent, so the reconciler sends it again later
        log.warning("could not send shard %s of round %s of experiment %s", row.index, row.round, experiment.pk)
    return True


def claim(experiment_id: int, round_number: int, index: int, worker: str, pid: int) -> RoundShard | None:
    """The shard's row if this process may work on it now: its round is the experiment's next and
    active, and no live process holds the shard. None for duplicate, late or stopped deliveries."""
    now = timezone.now()
    free = Q(lease_expires__isnull=True) | Q(lease_expires__lt=now)
    rows = RoundShard.objects.filter(
        free,
        experiment_id=experiment_id,
        round=round_number,
        index=index,
        experiment__status__in=ACTIVE,
        experiment__current_round=round_number - 1,
    )
    lease = now + timedelta(seconds=settings.WORKER_LOST_AFTER)
    if not rows.update(worker=worker, claim_pid=pid, lease_expires=lease):
        return None
    return RoundShard.objects.get(experiment_id=experiment_id, round=round_number, index=index)


def mark_done(row: RoundShard) -> bool:
    """Its partial sum is on disk; returns whether every shard of the round is now done. The
    lease stays until the round is recorded: if this process dies while concluding, it runs out."""
    RoundShard.objects.filter(pk=row.pk).update(done=True)
    return not RoundShard.objects.filter(experiment_id=row.experiment_id, round=row.round, done=False).exists()


def forget_round(experiment_id: int, round_number: int) -> None:
    """The round is recorded: drop its rows and partial files."""
    RoundShard.objects.filter(experiment_id=experiment_id, round__lte=round_number).delete()
    shutil.rmtree(partial_path(experiment_id, round_number, 0).parent, ignore_errors=True)


def renew_leases(hostname: str, pids: list[int]) -> int:
    """Extend the leases of the shards ``hostname``'s live processes ``pids`` hold (rounds not yet recorded)."""
    expires = timezone.now() + timedelta(seconds=settings.WORKER_LOST_AFTER)
    return RoundShard.objects.filter(
        worker=hostname, claim_pid__in=pids, round__gt=models.F("experiment__current_round")
    ).update(lease_expires=expires)


def reconcile(now, idle_queues: set[str], broker_since=None) -> list[tuple[int, int, int]]:
    """Send again the shards of in-flight rounds that no live process holds and that were lost: the
    holder died, the broker restarted empty after it was sent (``broker_since``), or the message
    waited unclaimed too long. Returns (experiment, round, shard) sent."""
    sent = []
    rows = RoundShard.objects.filter(
        experiment__status__in=ACTIVE, round=models.F("experiment__current_round") + 1
    ).select_related("experiment")
    by_round: dict[tuple[int, int], list[RoundShard]] = {}
    for row in rows:
        by_round.setdefault((row.experiment_id, row.round), []).append(row)
    for shards in by_round.values():
        todo = [r for r in shards if not r.done] or shards[-1:]
        for row in todo:
            if _lost(row, now, idle_queues, broker_since) and _send(row.experiment, row, sent_at=row.dispatched_at):
                why = f"was held by {row.worker}, which stopped answering" if row.worker else "was not taken"
                row.experiment.log("warning", f"Shard {row.index + 1} of round {row.round} {why}; sent it again")
                sent.append((row.experiment_id, row.round, row.index))
    return sent


def _lost(row: RoundShard, now, idle_queues: set[str], broker_since=None) -> bool:
    if _held(row, now):
        return False
    if row.lease_expires is not None:
        return True  # claimed, and the holder's lease ran out
    if broker_since is not None and row.dispatched_at is not None and row.dispatched_at < broker_since:
        return True  # its message was in the broker that restarted empty
    waited = (now - row.dispatched_at).total_seconds() if row.dispatched_at else float("inf")
    if waited > settings.WORKER_LOST_AFTER and row.experiment.queue in idle_queues:
        return True
    return waited > settings.ROUND_RESEND_AFTER
