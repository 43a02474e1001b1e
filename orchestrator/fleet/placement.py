"""Where each ready round goes: the placement half of a scheduling decision, shared by production and the
simulation (issue 17).

``orchestrator.fleet.policies.order`` says which ready round goes first; ``place`` says to which worker, and
``schedule()`` (``orchestrator.fleet.scheduling``) and the scheduling benchmark's simulation
(``benchmarks.sched_sim``) both call it, so a decision the benchmark reports is one production makes.
It imports no Django and no Celery: what it decides from is passed in (the ordered candidates, the live
workers' rooms, where each experiment last ran), and what it does goes out through two callbacks,
``reserve`` (production's per-worker compare-and-swap; always true in the simulation) and ``send``
(production's conditional dispatch; the simulation starts the round on a device).

Rules, in order of precedence:

- **Plugins**: a run that recorded plugin components goes only to a live worker that loaded them all
  (its own queue); with none free it waits.
- **Affinity**: a round goes to the worker that ran the experiment's previous round (it holds the
  experiment, and its data, in its caches) through that worker's own queue, when that worker is live,
  serves the queue and has a free slot; otherwise to the shared queue (``""``), where any worker takes
  it at the price of a state load. ``Fleet.holders`` lists only what the scheduling worker itself
  holds (``schedule(by=)``): a holder known to be alive, never one that may have died between rounds.
- **Pack**: a round goes to the least busy live worker it fits on (``policies.pack_fits``), the one that
  holds it winning ties; rounds of unknown memory (first-round probes) go before measured ones, so they
  take idle workers, and boosted (aged) rounds stay first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fedweb_engine.components import provenance
from orchestrator.fleet import policies
from orchestrator.fleet.policies import Candidate, QueueView, is_boosted, pack_fits


@dataclass
class WorkerRoom:
    """A live worker serving the queue: how many rounds it may run at once and what it runs now."""

    hostname: str
    slots: int
    capacity_mb: float  # the memory budget `pack` fits rounds into (0: never pack)
    sends: int  # its send counter when read: packing it again requires it unchanged
    in_flight_mem_mb: list[float | None] = field(default_factory=list)  # one per round held or sent to it
    plugins: list[dict] = field(default_factory=list)  # registry.installed_plugins() of its last heartbeat

    def has_plugins(self, recorded: list[dict]) -> bool:
        """May this worker run a round of an experiment that recorded ``recorded`` plugins?"""
        return not provenance.missing(recorded, self.plugins)

    @property
    def free(self) -> bool:
        return len(self.in_flight_mem_mb) < self.slots


@dataclass(frozen=True)
class Fleet:
    """What placement knows besides the candidates: the queue's live workers and its limits."""

    rooms: list[WorkerRoom]
    room: int  # rounds the queue may still start (live slots minus rounds in flight); unused under pack
    holders: dict[int, str]  # experiment -> hostname of the worker that ran its previous round
    plugins: dict[int, list[dict]] = field(default_factory=dict)  # experiment -> its recorded plugins
    pack_slots: int = 2  # FEDWEB_PACK_SLOTS
    margin: float = 0.1  # pack_fits's safety margin


Send = Callable[[Candidate, str], bool]  # (candidate, hostname or "" for the shared queue) -> sent?
Reserve = Callable[[WorkerRoom], bool]


def place(
    policy: str, ordered: list[Candidate], fleet: Fleet, view: QueueView, send: Send, reserve: Reserve
) -> list[Candidate]:
    """Send the ordered ready rounds where the rules above say, while there is room; returns those sent."""
    if policies.get(policy).packs:
        return _pack(_pack_order(ordered, view), fleet, send, reserve)
    sent: list[Candidate] = []
    for c in ordered:
        if len(sent) >= fleet.room:
            break
        target = _target(c, fleet, reserve)
        if target is None:
            continue  # no eligible worker has a free slot: it waits (queues.waiting_reason says why)
        if not send(c, target.hostname if isinstance(target, WorkerRoom) else ""):
            # Another scheduler sent this round after our view was read, so it is acting on the same
            # room: sending the next candidate on our stale count would run one round too many (and,
            # under fifo, a later experiment beside the first). Its pass, or the next, decides instead.
            return sent
        sent.append(c)
        if isinstance(target, WorkerRoom):
            target.in_flight_mem_mb.append(c.peak_mem_mb)
    return sent


def _target(c: Candidate, fleet: Fleet, reserve: Reserve) -> WorkerRoom | str | None:
    """Where ``c`` goes outside pack: its holder's room, an eligible room for a plugin run, the shared
    queue (``""``), or nowhere yet (None)."""
    plugins = fleet.plugins.get(c.experiment_id) or []
    holder = _room(fleet.rooms, fleet.holders.get(c.experiment_id, ""))
    if holder is not None and holder.free and holder.has_plugins(plugins) and reserve(holder):
        return holder
    if not plugins:
        return ""
    for room in _least_busy(fleet.rooms, ""):
        if room.free and room.has_plugins(plugins) and reserve(room):
            return room
    return None


def _pack_order(ordered: list[Candidate], view: QueueView) -> list[Candidate]:
    # A round of unknown memory (a first-round probe) runs only alone, so it takes an idle worker before
    # measured rounds, which can still pack beside each other (age-boosted ones stay first).
    return sorted(ordered, key=lambda c: (not is_boosted(c, view), c.peak_mem_mb is not None))


def _pack(ordered: list[Candidate], fleet: Fleet, send: Send, reserve: Reserve) -> list[Candidate]:
    """Each ready round, in order, to the least busy live worker it fits on and that has its plugins
    (the worker holding it first among equals; none fits: it waits)."""
    sent: list[Candidate] = []
    for c in ordered:
        plugins = fleet.plugins.get(c.experiment_id) or []
        for room in _least_busy(fleet.rooms, fleet.holders.get(c.experiment_id, "")):
            if not room.has_plugins(plugins) or not fits(room, c, fleet) or not reserve(room):
                continue
            if not send(c, room.hostname):
                # Another scheduler sent this round after our rooms were read: where it went, and so
                # what is in flight, is unknown here. Packing more on that stale view could start two
                # rounds that do not fit together; that scheduler's pass (or the next) decides instead.
                return sent
            room.in_flight_mem_mb.append(c.peak_mem_mb)
            sent.append(c)
            break
    return sent


def fits(room: WorkerRoom, c: Candidate, fleet: Fleet) -> bool:
    """May ``c`` start on ``room`` under pack? An idle worker takes any round; a busy one a second (up to
    FEDWEB_PACK_SLOTS and its own --concurrency) only when the measured peaks fit its budget. A budget
    of 0 never packs."""
    busy = room.in_flight_mem_mb
    if not busy:
        return True
    if len(busy) >= min(room.slots, fleet.pack_slots) or room.capacity_mb <= 0:
        return False
    return pack_fits(busy, c, room.capacity_mb, fleet.margin)


def _least_busy(rooms: list[WorkerRoom], holder: str) -> list[WorkerRoom]:
    return sorted(rooms, key=lambda r: (len(r.in_flight_mem_mb), r.hostname != holder, r.hostname))


def _room(rooms: list[WorkerRoom], hostname: str) -> WorkerRoom | None:
    return next((r for r in rooms if hostname and r.hostname == hostname), None)
