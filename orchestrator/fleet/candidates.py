"""The database's view of a queue, as the pure policies (``orchestrator.fleet.policies``) take it.

Everything a scheduling decision needs is read here from the database, never from a process's
memory, so any process (the web, any worker's heartbeat) decides the same way, and a restart
loses nothing: ready rounds, their measured round times and peak memory, each user's (or team's)
accumulated round seconds, and which live workers have room (and which plugins they loaded).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Avg, F, Max, Q
from django.utils import timezone

from orchestrator.experiments.models import ACTIVE, Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet import gangs, policies
from orchestrator.fleet.placement import WorkerRoom
from orchestrator.fleet.policies import Candidate, QueueView
from orchestrator.fleet.workers import Worker
from orchestrator.sweeps.models import Sweep

DEFAULT_PROBE_ROUND_SECONDS = 1.0  # srtf's guess for a round when no experiment of the queue has run one


def policy_for(queue: str) -> str:
    """The queue's policy from FEDWEB_POLICY (``cpu=srtf,gpu=pack``); ``fifo`` when not named."""
    return settings.FEDWEB_POLICY.get(queue, "fifo")


def held(now: datetime) -> Q:
    """Experiments whose next round a live process is running (claimed, lease not run out)."""
    return Q(claimed_round__gt=F("current_round"), lease_expires__gte=now)


def ready_experiments(queue: str, now: datetime):
    """Active experiments of ``queue`` whose next round exists, is not sent and is not held."""
    return (
        Experiment.objects.filter(
            status__in=ACTIVE, queue=queue, dispatched_round__lte=F("current_round"),
            current_round__lt=F("total_rounds"),
        )
        .exclude(held(now))
        .order_by("queued_at", "pk")
    )  # fmt: skip


def busy_rounds(queue: str, now: datetime) -> int:
    """Rounds of ``queue`` taking a worker's slot: running under a live lease, or sent and not yet claimed."""
    sent = Q(status__in=ACTIVE, dispatched_round__gt=F("current_round"))
    return Experiment.objects.filter(sent | held(now), queue=queue).count()


def sweep_rooms(experiments, now: datetime) -> dict[int, list[int]]:
    """{sweep: [rounds it may still start, its send counter]} for each sweep among ``experiments``
    that caps its workers (``Sweep.max_workers``): the cap minus its rounds sent or running, on any
    queue. The counter is read first, so a send made after this read makes ``take_sweep_slot`` fail."""
    ids = {e.sweep_id for e in experiments if e.sweep_id is not None}
    caps = {pk: (cap, sends) for pk, cap, sends in Sweep.objects.filter(pk__in=ids, max_workers__isnull=False)
            .values_list("pk", "max_workers", "sends")}  # fmt: skip
    if not caps:
        return {}
    sent = Q(status__in=ACTIVE, dispatched_round__gt=F("current_round"))
    busy = Experiment.objects.filter(sent | held(now), sweep_id__in=caps).values_list("sweep_id", flat=True)
    taken = {pk: 0 for pk in caps}
    for pk in busy:
        taken[pk] += 1
    return {pk: [cap - taken[pk], sends] for pk, (cap, sends) in caps.items()}


def take_sweep_slot(sweep_id: int, rooms: dict[int, list[int]]) -> bool:
    """Take one of a capped sweep's slots: fails if another scheduler sent one of its rounds since
    ``rooms`` was read (it is looked at again on the next pass), so its cap is never passed."""
    room = rooms[sweep_id]
    won = Sweep.objects.filter(pk=sweep_id, sends=room[1]).update(sends=F("sends") + 1)
    room[1] = room[1] + 1 if won else -1  # -1: stale, never taken again in this pass
    return bool(won)


def measurements(experiment_ids: list[int], queue: str) -> dict[int, tuple[float | None, float | None]]:
    """{experiment: (mean round seconds, peak memory MB)} over its recorded rounds.

    Peak memory is VRAM peak on the GPU queue and the process's resident memory (``rss_mb``,
    interpreter and torch included: conservative) on any other queue.
    """
    mem = "vram_peak_mb" if _is_gpu_queue(queue) else "rss_mb"
    rows = (
        RoundMetric.objects.filter(experiment_id__in=experiment_ids)
        .values("experiment_id")
        .annotate(mean=Avg("round_seconds"), peak=Max(mem))
        .order_by()
    )
    return {row["experiment_id"]: (row["mean"], row["peak"]) for row in rows}


def share_key(owner_id: int, team_id: int | None) -> str:
    """Whose share an experiment counts against: its team's when it has one, else its owner's."""
    return f"team:{team_id}" if team_id is not None else f"user:{owner_id}"


# Service older than this many half-lives counts for less than a millionth: it is not read at all.
_FORGOTTEN_AFTER_HALF_LIVES = 20


def service_seconds(queue: str, now: datetime | None = None, *, by: str = "share") -> dict[str, float]:
    """Round seconds recorded on ``queue``, each decayed by its age (FEDWEB_FAIR_HALF_LIFE), per share key
    (what ``fair`` equalises); ``by="user"`` counts per owner (``user:<id>``) and ``by="team"`` per team
    (``team:<id>``, runs without a team left out), for the Workers page."""
    now = now or timezone.now()
    half_life = float(settings.FEDWEB_FAIR_HALF_LIFE)
    since = now - timedelta(seconds=half_life * _FORGOTTEN_AFTER_HALF_LIVES)
    rows = RoundMetric.objects.filter(experiment__queue=queue, recorded__gte=since).values_list(
        "experiment__owner_id", "experiment__team_id", "round_seconds", "recorded"
    )
    totals: dict[str, float] = {}
    for owner_id, team_id, seconds, recorded in rows:
        if by == "user":
            key = f"user:{owner_id}"
        elif by == "team":
            if team_id is None:
                continue
            key = f"team:{team_id}"
        else:
            key = share_key(owner_id, team_id)
        age = (now - recorded).total_seconds()
        totals[key] = totals.get(key, 0.0) + policies.decayed(seconds or 0.0, age, half_life)
    return totals


def candidates(experiments, measured: dict[int, tuple[float | None, float | None]]) -> list[Candidate]:
    """The policies' view of ready experiments (in the same order)."""
    return [_candidate(e, *measured.get(e.pk, (None, None))) for e in experiments]


def _candidate(e, round_seconds: float | None, peak_mem_mb: float | None) -> Candidate:
    submitted = (e.queued_at or e.created).timestamp()
    return Candidate(
        experiment_id=e.pk,
        share_key=share_key(e.owner_id, e.team_id),
        priority=e.priority,
        submitted=submitted,
        ready_since=e.ready_since.timestamp() if e.ready_since else submitted,
        rounds_left=e.total_rounds - e.current_round,
        round_seconds=round_seconds,
        peak_mem_mb=peak_mem_mb,
        background=e.background,
    )


def queue_view(queue: str, ready: list[Candidate], now: datetime) -> QueueView:
    """What the policy knows beside the candidates. The probe estimate of a round is the shortest
    measured mean round time among them (a new experiment is guessed short, so its first round,
    which measures it, comes early), or DEFAULT_PROBE_ROUND_SECONDS when none is measured."""
    measured = [c.round_seconds for c in ready if c.round_seconds]
    return QueueView(
        now=now.timestamp(),
        service_seconds=service_seconds(queue, now) if policies.get(policy_for(queue)).needs_service else {},
        probe_round_seconds=min(measured) if measured else DEFAULT_PROBE_ROUND_SECONDS,
        age_boost_seconds=float(settings.FEDWEB_AGE_BOOST_SECONDS),
    )


def live_rooms(queue: str, now: datetime) -> list[WorkerRoom]:
    """The live workers serving ``queue``, with the memory of the rounds each holds or was sent.

    Workers are read before their rounds, so a send counter read here is older than the rounds:
    a packed send made after this read makes ``reserve`` fail rather than pack on stale state.
    """
    rooms = {
        w.hostname: WorkerRoom(w.hostname, w.slots, _capacity_mb(queue, w.devices), w.sends, plugins=w.plugins or [])
        for w in Worker.live()
        if queue in w.serve_queues()
    }
    sent = Q(status__in=ACTIVE, dispatched_round__gt=F("current_round"))
    busy = list(Experiment.objects.filter(sent | held(now), queue=queue).values_list("pk", "worker", "dispatched_to"))
    peaks = measurements([pk for pk, _, _ in busy], queue)
    holders = set(Experiment.objects.filter(held(now), pk__in=[pk for pk, _, _ in busy]).values_list("pk", flat=True))
    for pk, worker, dispatched_to in busy:
        room = rooms.get(worker if pk in holders else dispatched_to)
        if room is not None:
            room.in_flight_mem_mb.append(peaks.get(pk, (None, None))[1])
    for hostname in gangs.busy_members(queue):  # a rank of another worker's round: its slot is taken
        if hostname in rooms:
            rooms[hostname].in_flight_mem_mb.append(None)
    return list(rooms.values())


def reserve(room: WorkerRoom) -> bool:
    """Take the right to send ``room``'s worker one more round: fails if another scheduler sent it
    one since ``room`` was read (then its state is stale: it is looked at again next time)."""
    won = Worker.objects.filter(hostname=room.hostname, sends=room.sends).update(sends=F("sends") + 1)
    room.sends = room.sends + 1 if won else -1  # -1: stale, never reserved again in this pass
    return bool(won)


def _capacity_mb(queue: str, devices: list[dict] | None) -> float:
    # A GPU worker packs into its smallest device's total memory; a CPU one into the configured budget.
    if _is_gpu_queue(queue) and devices:
        return float(min(d.get("total_mb", 0) for d in devices))
    return float(settings.FEDWEB_PACK_CAPACITY_MB)


def _is_gpu_queue(queue: str) -> bool:
    queues = settings.FEDWEB_QUEUES
    return len(queues) > 1 and queue == queues[1]


def now() -> datetime:
    return timezone.now()
