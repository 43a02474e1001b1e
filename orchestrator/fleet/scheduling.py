"""Where and when rounds run. The one place that sends round tasks, and decides which goes next.

A round is *ready* when its experiment is active and the round before it is recorded (start,
resume, after each round). ``schedule(queue)`` sends ready rounds in the order of the queue's
policy (``orchestrator.fleet.policies``: fifo, priority, srtf, fair, pack; FEDWEB_POLICY) while the queue
has room: its live workers' slots minus rounds running under a live lease minus rounds sent and
not yet claimed, minus the workers serving as ranks of another's distributed rounds
(``orchestrator.fleet.gangs``). Everything it decides from is in the database (``orchestrator.fleet.candidates``), so
any process decides alike and a restart loses nothing. It runs after every recorded round (and
after any round task, whatever its outcome), on start and resume, and in every worker's heartbeat,
so a worker that comes alive starts work within a heartbeat.

Where a round goes is ``placement.place`` (shared with the scheduling benchmark's simulation). An
experiment's next round goes to the worker that ran its previous round (``Experiment.worker``: it
holds the experiment and its data in its caches) through that worker's own queue (``<hostname>.dq2``),
when that worker is live, serves the queue and has a free slot; otherwise to the shared queue, where
any worker takes it at the price of loading its state. A round sent to a worker that then died is
released by the reconciler and sent again, as for ``pack``. A sweep with a worker cap
(``Sweep.max_workers``) has at most that many rounds sent or running at once; its other ready
rounds wait in the database, in the queue's order, and each send under the cap takes a
compare-and-swap on the sweep's row (``candidates.take_sweep_slot``).

With no live worker serving a queue, its ready rounds are sent at once (in policy order) and the
broker holds them until a worker comes; under ``pack`` they wait in
the database instead, because a packed round is sent to one chosen worker's own queue
(``<hostname>.dq2``, Celery's worker_direct) only when ``pack_fits`` says the measured peaks of
the rounds on that worker, plus its own, fit in the worker's memory budget.

A run that uses plugin components (``Experiment.plugins``, recorded at creation) goes only to a
worker that loaded every one of them at the recorded source hash (``provenance.missing``, fed the
``plugins`` of each worker's last heartbeat). Such a round is sent to an eligible live worker's
own queue, as ``pack`` sends, rather than to the shared queue or to a queue per plugin set:
the shared queue cannot choose its consumer, and a queue per set would need workers to learn new
queues at run time, while the direct queue already exists, is free of per-set bookkeeping, and is
covered by the reconciler (a round sent to a worker that died is released and sent again). With
no eligible live worker it waits in the database, and ``queues.waiting_reason`` says which plugin
is missing. The round task checks again before claiming (``workers.tasks``): a worker that lacks
one refuses, logs why and releases the round, so a stale heartbeat costs a resend, never a round.

No round is ever lost. Every send is recorded on the experiment (``dispatched_round`` /
``dispatched_at``) with a conditional UPDATE, so of several senders racing for the same round
exactly one sends. ``reconcile()`` runs in every worker's heartbeat: a round whose holder died (its
lease ran out), whose target worker died, or whose message sat unclaimed for too long is made
ready again (one reconciler wins), and then every queue with ready rounds is scheduled. A
duplicate message is harmless: the claim stays the arbiter.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import current_app as app  # the Celery app (fedweb.celery), by name: the domain imports no glue
from celery.utils.nodenames import worker_direct
from django.conf import settings
from django.db.models import F
from django.dispatch import receiver
from django.utils import timezone

from orchestrator.experiments.models import ACTIVE, Experiment, round_ready
from orchestrator.fleet import candidates, gangs, placement, policies
from orchestrator.fleet.workers import Worker, queue_name

log = logging.getLogger(__name__)

ROUND_TASK = "workers.tasks.run_round"  # sent by name: scheduling never imports the worker code


def dispatch_round(experiment, round_number: int, *, force: bool = False, sent_at=None, to: str = "") -> bool:
    """Send ``round_number`` of an active experiment to its queue, unless it was already sent.

    ``force`` sends again even if it was; ``sent_at`` sends again only if the last send is still
    the one made at that time. ``to`` sends it to that worker's own queue instead (packing).
    Returns whether this call sent it. Callers other than ``schedule`` bypass the policy.
    """
    rows = Experiment.objects.filter(
        pk=experiment.pk, status__in=ACTIVE, current_round=round_number - 1, total_rounds__gte=round_number
    )
    if sent_at is not None:
        rows = rows.filter(dispatched_at=sent_at)
    elif not force:
        rows = rows.filter(dispatched_round__lt=round_number)
    if not rows.update(dispatched_round=round_number, dispatched_at=timezone.now(), dispatched_to=to):
        return False
    _send(experiment.pk, round_number, experiment.queue or queue_name("cpu"), to)
    return True


def _send(experiment_id: int, round_number: int, queue: str, to: str = "") -> None:
    try:
        target = worker_direct(to) if to else queue
        app.send_task(ROUND_TASK, (experiment_id, round_number), queue=target)
    except Exception:  # broker away: the send is recorded, so the reconciler sends it again later
        log.warning("could not send round %s of experiment %s", round_number, experiment_id, exc_info=True)


def schedule(queue: str, *, by: str = "") -> list[tuple[int, int]]:
    """Send ``queue``'s ready rounds, best first by its policy, while it has room; returns what was sent.

    ``by``: the worker that calls this right after a round of its own (``workers.tasks``). Only it
    gets affinity: it is alive, and the experiments whose last round it recorded go back to it. Any
    other caller (a heartbeat, the web) cannot know that a round's holder is still alive (it may have
    died between two rounds, its heartbeat not yet stale), so it sends to the shared queue, but only
    after ``FEDWEB_AFFINITY_GRACE`` seconds: until then the holder's own pass, which follows its
    record at once, places the round (``_kept_for_holder``).

    Which round goes first is ``policies.order``; where it goes is ``placement.place`` (the worker that
    ran its previous round when that one has a free slot, else the shared queue; pack and plugin rules
    there), the same two functions the scheduling benchmark's simulation calls.

    Two schedulers racing (a worker after its round, another's heartbeat) may both see the same
    room and send one round too many: it waits in the broker, and claims keep it exactly-once.
    A send to one worker's own queue takes a per-worker compare-and-swap (``candidates.reserve``)
    first, which prevents even that.
    """
    if queue in ("", "inline"):
        return []
    now = timezone.now()
    experiments = list(candidates.ready_experiments(queue, now))
    if not experiments:
        return []
    rooms = candidates.live_rooms(queue, now)
    kept = _kept_for_holder(experiments, by, rooms, now)
    experiments = [e for e in experiments if e.pk not in kept]
    if not experiments:
        return []
    policy = candidates.policy_for(queue)
    ready = candidates.candidates(experiments, candidates.measurements([e.pk for e in experiments], queue))
    view = candidates.queue_view(queue, ready, now)
    by_id = {e.pk: e for e in experiments}
    fleet = placement.Fleet(
        rooms=rooms,
        room=_room(queue, now) - len(kept),
        holders=_holders(experiments, by),
        plugins={e.pk: e.plugins for e in experiments if e.plugins},
        pack_slots=settings.FEDWEB_PACK_SLOTS,
    )

    caps = candidates.sweep_rooms(experiments, now)

    def send(c: policies.Candidate, to: str) -> bool:
        e = by_id[c.experiment_id]
        if e.sweep_id in caps and not candidates.take_sweep_slot(e.sweep_id, caps):
            return False  # another scheduler sent a round of this sweep meanwhile: its pass decides
        return dispatch_round(e, e.current_round + 1, to=to)

    ordered = _within_sweep_caps(policies.order(policy, ready, view), by_id, caps)
    sent = placement.place(policy, ordered, fleet, view, send, candidates.reserve)
    return [(c.experiment_id, by_id[c.experiment_id].current_round + 1) for c in sent]


def _within_sweep_caps(ordered: list[policies.Candidate], by_id: dict, caps: dict[int, list[int]]):
    """The ordered candidates without those past their sweep's cap (``Sweep.max_workers``): of each
    capped sweep only its first ready rounds, as many as it may still start. A search's runs keep
    the queue's policy and order; the cap only holds back the rest of its rounds."""
    left = {pk: room for pk, (room, _) in caps.items()}
    kept = []
    for c in ordered:
        sweep = by_id[c.experiment_id].sweep_id
        if sweep in left:
            if left[sweep] <= 0:
                continue
            left[sweep] -= 1
        kept.append(c)
    return kept


def _kept_for_holder(experiments: list[Experiment], by: str, rooms: list[placement.WorkerRoom], now) -> set[int]:
    """The experiments whose last round a live worker other than ``by`` recorded less than
    ``FEDWEB_AFFINITY_GRACE`` seconds ago: that worker's own pass, which runs right after it records,
    sends the next round back to it. Without this a heartbeat's pass could get there first and send it
    to the shared queue, where another worker takes it and loads its state: a move for nothing. Their
    slot on the holder is counted as taken, so this pass decides the rest as if the round had gone."""
    grace = settings.FEDWEB_AFFINITY_GRACE
    live = {r.hostname: r for r in rooms}
    kept = set()
    for e in experiments:
        holder = live.get(e.worker)
        if (
            holder is not None
            and e.worker != by
            and e.current_round > 0
            and e.claimed_round == e.current_round  # recorded the round it claimed (no lost lease)
            and e.ready_since is not None
            and (now - e.ready_since).total_seconds() < grace
            # Not one already sent since it became ready and then released (its message lost with a
            # broker that restarted): the holder's own pass has been, the round goes now.
            and (e.dispatched_at is None or e.dispatched_at < e.ready_since)
            and holder.free
        ):
            kept.add(e.pk)
            holder.in_flight_mem_mb.append(None)
    return kept


def _holders(experiments: list[Experiment], by: str) -> dict[int, str]:
    """The experiments whose last round ``by`` recorded, mapped to it. Not one it claimed a later round
    of and never recorded (its lease ran out): affinity would send the round back to a worker that
    may be dying, to wait there until the reconciler noticed it is gone."""
    return {
        e.pk: e.worker
        for e in experiments
        if by and e.worker == by and e.current_round > 0 and e.claimed_round == e.current_round
    }


def _room(queue: str, now) -> int:
    """Rounds the queue may start now: its live workers' slots minus the rounds in flight and the
    gangs' members. With no live worker, no limit: the broker holds the rounds until one comes (it then
    runs them in this order)."""
    slots = sum(w.slots for w in Worker.live() if queue in w.serve_queues())
    return slots - candidates.busy_rounds(queue, now) - len(gangs.busy_members(queue)) if slots else 1_000_000_000


def release(experiment, *, sent_at=None) -> bool:
    """Make an experiment's sent round ready again (a copy may be lost), so ``schedule`` sends it anew.

    ``sent_at``: only if the last send is still the one made then (of several reconcilers noticing
    the same lost round, one releases it). A copy still on its way stays harmless: claims arbitrate.
    """
    rows = Experiment.objects.filter(pk=experiment.pk, dispatched_round__gt=F("current_round"))
    if sent_at is not None:
        rows = rows.filter(dispatched_at=sent_at)
    return bool(rows.update(dispatched_round=F("current_round"), dispatched_to=""))


def reconcile(now=None, *, broker_since=None) -> list[tuple[int, int]]:
    """Recover stuck rounds, then schedule every queue with ready rounds; returns what was sent.

    Stuck means no live process holds its next round, it was sent, and one of: its holder died
    (the lease ran out: heartbeats renew it while the process lives), the worker it was sent to
    is not live, it was sent before ``broker_since`` (when the broker restarted empty: its message
    is gone, so it goes again at once rather than after a timeout), its message went unclaimed for
    ``WORKER_LOST_AFTER`` while a worker serving its queue sat idle (a worker died after taking it
    but before claiming it), or for ``ROUND_RESEND_AFTER`` whatever the queue (lost by the broker).
    A round that was never sent is not stuck: it is ready, waiting for its queue's policy to pick
    it.
    """
    now = now or timezone.now()
    idle_queues = _idle_queues()
    live_hosts = set(Worker.live().values_list("hostname", flat=True))
    stuck = []
    for e in Experiment.objects.filter(status__in=ACTIVE).exclude(queue="inline").exclude(candidates.held(now)):
        if e.current_round >= e.total_rounds:  # its worker died between the last round and completing it
            e.complete()
            continue
        nxt = e.current_round + 1
        waited = (now - e.dispatched_at).total_seconds() if e.dispatched_at else float("inf")
        if e.dispatched_round < nxt:
            continue  # ready: scheduled below
        if e.claimed_round == nxt and e.lease_expires is not None and e.dispatched_at < e.lease_expires:
            why = f"was held by {e.worker}, which stopped answering"
        elif e.dispatched_to and e.dispatched_to not in live_hosts:
            why = f"was sent to {e.dispatched_to}, which stopped answering"
        elif broker_since is not None and e.dispatched_at < broker_since and e.claimed_round < nxt:
            why = f"was lost with the broker, which restarted empty at {broker_since:%H:%M:%S} UTC"
        elif waited > settings.WORKER_LOST_AFTER and e.queue in idle_queues:
            why = f"was not taken by the idle workers of '{e.queue}'"
        elif waited > settings.ROUND_RESEND_AFTER:
            why = "waited unclaimed too long"
        else:
            continue
        if release(e, sent_at=e.dispatched_at):
            stuck.append((e, nxt, why))
    gangs.reconcile()  # gangs whose leader stopped answering, or whose run stopped
    sent = [pair for queue in _queues_with_ready_rounds() for pair in schedule(queue)]
    for e, nxt, why in stuck:
        e.log("warning", f"Round {nxt} {why}; " + ("sent it again" if (e.pk, nxt) in sent else "it is ready again"))
    return sent


def _queues_with_ready_rounds() -> list[str]:
    rows = Experiment.objects.filter(
        status__in=ACTIVE, dispatched_round__lte=F("current_round"), current_round__lt=F("total_rounds")
    ).exclude(queue__in=["", "inline"])
    return sorted(set(rows.values_list("queue", flat=True)))


def _idle_queues() -> set[str]:
    """Queues with a live worker that is running no round right now."""
    return {q for w in Worker.live().filter(current_experiment__isnull=True) for q in w.serve_queues()}


def renew_leases(hostname: str, pids: list[int]) -> int:
    """Extend the leases of the rounds that ``hostname``'s live processes ``pids`` are running."""
    expires = timezone.now() + timedelta(seconds=settings.WORKER_LOST_AFTER)
    return Experiment.objects.filter(worker=hostname, claim_pid__in=pids, claimed_round__gt=F("current_round")).update(
        lease_expires=expires
    )


@receiver(round_ready, dispatch_uid="fedweb-schedule-ready-round")
def _on_round_ready(sender, experiment, resumed: bool, **kwargs) -> None:
    """Start and resume: the run's next round is ready. After a resume a copy sent before the pause
    may have been lost meanwhile, so the round is made ready again (a duplicate is harmless)."""
    if resumed:
        release(experiment)
    schedule(experiment.queue)
