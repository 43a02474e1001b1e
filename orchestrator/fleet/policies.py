"""Scheduling policies: which ready experiment's round runs next on a queue (after Salus).

A policy is a pure function from the queue's state to an order. This module imports no Django and no
Celery, so the dispatcher (``orchestrator/fleet/scheduling.py``) and the scheduling benchmark's simulation
(``benchmarks/scheduling.py``) run exactly the same code.

- ``fifo``: first submitted first (today's behaviour).
- ``priority``: higher ``priority`` first, then FIFO.
- ``srtf``: shortest estimated remaining time first (measured mean round time x rounds left; an
  experiment with no measured round yet is estimated with the short probe round time).
- ``fair``: the share key (user, or team) with the least accumulated round seconds first; what is
  accumulated decays with a half-life (``decayed``), so heavy use long ago does not hold a key back.
- ``pack``: orders like ``fifo``; whether a second round may start beside one in flight is ``pack_fits``.

Policies are a registry, as the engine's strategies are: a policy is one sort-key function under
``@policy(name, ...)``, with its options (``packs``: rounds share a device when ``pack_fits`` says
so; ``needs_service``: the view carries the decayed service per share key). Nothing else names a
policy: the settings' choices, the candidates' view, placement and the scheduling benchmark read
the registry. A new policy is one decorated function here (or in a plugin module, registered
before settings are read).

Under every policy a candidate whose round has been ready longer than ``age_boost_seconds`` goes before
all others (oldest wait first), so no policy starves an experiment forever; a ``background`` one (the
demo ``make run`` queues) goes after all others, so it never delays anyone's round. Ties always fall back to
``submitted``, then ``experiment_id``, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """An experiment whose next round is ready to run (or, in `running`, one whose round is in flight)."""

    experiment_id: int
    share_key: str  # whose share it counts against: "user:<id>", or "team:<id>" when it has a team
    priority: int  # higher runs first under `priority`
    submitted: float  # epoch seconds it was first queued (FIFO order, ties by experiment_id)
    ready_since: float  # epoch seconds its next round became ready (ageing is measured from here)
    rounds_left: int
    round_seconds: float | None  # measured mean seconds per round; None before its first round
    peak_mem_mb: float | None  # measured peak memory of one round (VRAM on GPU, RSS on CPU); None before
    background: bool = False  # yields to every other candidate whatever the policy (the demo)


@dataclass(frozen=True)
class QueueView:
    """What a policy may know about the queue besides its candidates."""

    now: float
    service_seconds: dict[str, float]  # accumulated round seconds per share_key (for `fair`)
    probe_round_seconds: float  # srtf's estimate of a round for an experiment with no measurement
    age_boost_seconds: float  # a candidate ready longer than this goes first (no starvation)

    def __post_init__(self) -> None:
        if not self.probe_round_seconds > 0:
            raise ValueError(f"probe_round_seconds: must be > 0, got {self.probe_round_seconds!r}")
        if not self.age_boost_seconds >= 0:
            raise ValueError(f"age_boost_seconds: must be >= 0, got {self.age_boost_seconds!r}")


SortKey = tuple[float, ...]


def remaining_seconds(c: Candidate, view: QueueView) -> float:
    """srtf's estimate of the worker time `c` still needs: mean round seconds x rounds left.

    Before its first round is measured the estimate uses the view's (short) probe round time, so a new
    experiment runs its first round early and is then ranked by what it really costs.
    """
    per_round = c.round_seconds if c.round_seconds is not None else view.probe_round_seconds
    return per_round * max(c.rounds_left, 0)


SortKeyFn = Callable[[Candidate, QueueView], SortKey]


@dataclass(frozen=True)
class Policy:
    """A registered policy: its sort key (lower goes first) and its options."""

    name: str
    key: SortKeyFn
    packs: bool = False  # several rounds may share a device when their measured memory fits (pack_fits)
    needs_service: bool = False  # the view's service_seconds must be filled (decayed, per share key)


_REGISTRY: dict[str, Policy] = {}


def policy(name: str, *, packs: bool = False, needs_service: bool = False) -> Callable[[SortKeyFn], SortKeyFn]:
    """Register the decorated sort key as policy ``name`` with its options."""

    def register(key: SortKeyFn) -> SortKeyFn:
        if name in _REGISTRY:
            raise ValueError(f"policy: {name!r} is already registered")
        _REGISTRY[name] = Policy(name, key, packs=packs, needs_service=needs_service)
        return key

    return register


def get(name: str) -> Policy:
    """The registered policy ``name``; a ValueError naming the field when there is none."""
    if name not in _REGISTRY:
        raise ValueError(f"policy: unknown {name!r}; expected one of {', '.join(names())}")
    return _REGISTRY[name]


def names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


@policy("fifo")
def _fifo_key(c: Candidate, view: QueueView) -> SortKey:
    return (c.submitted, c.experiment_id)


@policy("priority")
def _priority_key(c: Candidate, view: QueueView) -> SortKey:
    return (-c.priority, c.submitted, c.experiment_id)


@policy("srtf")
def _srtf_key(c: Candidate, view: QueueView) -> SortKey:
    return (remaining_seconds(c, view), c.submitted, c.experiment_id)


@policy("fair", needs_service=True)
def _fair_key(c: Candidate, view: QueueView) -> SortKey:
    return (view.service_seconds.get(c.share_key, 0.0), c.submitted, c.experiment_id)


@policy("pack", packs=True)
def _pack_key(c: Candidate, view: QueueView) -> SortKey:
    return _fifo_key(c, view)  # packing changes how many rounds run at once, not which goes first


POLICIES = names()  # the built-in policies, for the settings' choices and the benchmarks


def decayed(seconds: float, age_seconds: float, half_life_seconds: float) -> float:
    """What ``seconds`` of service given ``age_seconds`` ago still count for ``fair``: half after one
    half-life, a quarter after two. Service from the future (clock skew) counts in full."""
    if not half_life_seconds > 0:
        raise ValueError(f"half_life_seconds: must be > 0, got {half_life_seconds!r}")
    return seconds * 0.5 ** (max(age_seconds, 0.0) / half_life_seconds)


def is_boosted(c: Candidate, view: QueueView) -> bool:
    """Has `c` waited longer than the age boost allows? Then it goes before every non-boosted one."""
    return view.now - c.ready_since > view.age_boost_seconds


def order(policy: str, ready: list[Candidate], view: QueueView) -> list[Candidate]:
    """The ready candidates, best first. Pure and deterministic (ties: submitted, then experiment_id).
    Background candidates come after all others, by the policy among themselves, and are never
    boosted: the demo never holds the worker a user's round needs."""
    policy_key = get(policy).key

    def key(c: Candidate) -> tuple[int, SortKey]:
        if c.background:
            return (2, policy_key(c, view))
        if is_boosted(c, view):
            # Boosted candidates rank among themselves by how long they have waited, whatever the policy.
            return (0, (c.ready_since, c.submitted, c.experiment_id))
        return (1, policy_key(c, view))

    return sorted(ready, key=key)


def pack_fits(
    in_flight_mem_mb: list[float | None], candidate: Candidate, capacity_mb: float, margin: float = 0.1
) -> bool:
    """May `candidate` start beside rounds already in flight on one device? Unknown memory (None) never
    packs with anything (it runs alone first: its first round is the probe that measures it).

    It fits when the in-flight peaks plus its own stay within ``capacity_mb * (1 - margin)``. An idle
    device always takes a round, even one larger than the budget, as it would with packing off.
    """
    if not capacity_mb > 0:
        raise ValueError(f"capacity_mb: must be > 0, got {capacity_mb!r}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin: must be in [0, 1), got {margin!r}")
    if not in_flight_mem_mb:
        return True
    if candidate.peak_mem_mb is None or any(m is None for m in in_flight_mem_mb):
        return False
    used = sum(m for m in in_flight_mem_mb if m is not None)
    return used + candidate.peak_mem_mb <= capacity_mb * (1 - margin)
