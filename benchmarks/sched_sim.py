"""The scheduling benchmark's discrete-event fleet simulation (see ``scheduling.py``).

It decides with production's code: ``orchestrator.fleet.policies.order`` says which ready round goes first
and ``orchestrator.fleet.placement.place`` where it goes (the worker that holds the experiment, pack, the
shared queue), the two functions ``orchestrator.fleet.scheduling.schedule`` calls. Modelled here is only
what production does not decide: the broker (a round sent to the shared queue goes to the first
device with a free slot), processor sharing between packed rounds, and what a switch costs.

**Switches.** A device keeps the experiments it ran last (``CACHE_SIZE``, as ``workers.runtime``),
each at the round it reached, and the datasets it built (``DATA_CACHE``). A round of an experiment
the device does not hold at that round is a *switch*, which first costs, by ``switching``:

- ``free``: nothing (what the simulation assumed before issue 17);
- ``replay``: today's rebuild: build the Simulation from nothing (data included, ``build_s``), load
  the latest checkpoint (every ``CHECKPOINT_EVERY`` rounds) and replay the rounds since it;
- ``state``: issue 17's switch: load the published round state (``state_load_s``), after building
  the dataset when the device does not have it (``data_load_s``).

An experiment's first round costs its build (``build_s``, or ``state_load_s`` on cached data) under
``replay`` and ``state``, and is not a switch. The seconds are measured with the engine on this
machine (``scheduling.measure_base``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from benchmarks.sched_trace import SCALES, Job, Measured, Scale, generate, jain
from orchestrator.fleet import policies
from orchestrator.fleet.placement import Fleet, WorkerRoom, place
from orchestrator.fleet.policies import Candidate, QueueView, decayed, order

__all__ = ["SCALES", "Job", "Measured", "Scale", "SWITCHING", "MODELS", "generate", "jain", "simulate", "summarise"]

EPS = 1e-9
CACHE_SIZE = 2  # workers.runtime.CACHE_SIZE: simulations a worker keeps
DATA_CACHE = 4  # datasets a worker keeps (the trace's datasets are small: the byte bound holds them all)
CHECKPOINT_EVERY = 10  # the CHECKPOINT_EVERY default: where a replay starts from
HALF_LIFE_S = 4 * 3600.0  # the FEDWEB_FAIR_HALF_LIFE default
SWITCHING = ("free", "replay", "state")
# The switch-cost models the benchmark compares: (switching, affinity). ``today`` is FedWeb before
# issue 17 (no affinity, a switch rebuilds and replays); ``state`` is FedWeb with issue 17 done.
MODELS = {"free": ("free", True), "today": ("replay", False), "replay": ("replay", True), "state": ("state", True)}


@dataclass
class _Running:
    job: int
    remaining: float  # alone-speed seconds of work left (its switch cost included)
    started: float
    known_mem: float | None  # what the scheduler knew of its memory when it started


@dataclass
class _Device:
    hostname: str
    running: list[_Running] = field(default_factory=list)
    held: OrderedDict[int, int] = field(default_factory=OrderedDict)  # experiment -> rounds its copy has done
    data: OrderedDict[str, None] = field(default_factory=OrderedDict)  # datasets built here


@dataclass
class SimResult:
    """What one policy did to one workload."""

    policy: str
    finish: dict[int, float]
    busy_seconds: float  # device-seconds with at least one round in flight
    work_seconds: float  # alone-speed seconds of rounds (and switches) completed
    makespan: float
    jain_user_weighted: float = 0.0  # sum of Jain's index over users with work present x dt
    jain_team_weighted: float = 0.0  # the same over share keys (teams, or users without one)
    present_seconds: float = 0.0  # time with at least one experiment submitted and unfinished
    max_packed_mb: float = 0.0  # the most true memory ever in flight on one device with 2+ rounds
    max_in_flight: int = 0
    rounds_run: int = 0
    switches: int = 0
    rebuilds: int = 0
    replayed_rounds: int = 0
    switch_seconds: float = 0.0
    trace: list[tuple[float, str, int, str]] = field(default_factory=list)  # (start, device, experiment, sent to)


class _Fleet:
    def __init__(
        self,
        jobs: list[Job],
        policy: str,
        scale: Scale,
        probe: float,
        *,
        switching: str = "state",
        costs: dict[str, Measured] | None = None,
        hostnames: list[str] | None = None,
        half_life: float = HALF_LIFE_S,
        affinity: bool = True,
    ) -> None:
        if switching not in SWITCHING:
            raise ValueError(f"switching: unknown {switching!r}; expected one of {', '.join(SWITCHING)}")
        self.jobs = {j.experiment_id: j for j in jobs}
        self.policy, self.scale, self.probe, self.switching, self.half_life = policy, scale, probe, switching, half_life
        self.costs = costs or {}
        self.affinity = affinity  # False: placement never learns who holds what (FedWeb before issue 17)
        self.slots = scale.slots if policies.get(policy).packs else 1
        names = hostnames or [f"w{i}" for i in range(scale.workers)]
        self.devices = [_Device(name) for name in names]
        self.by_name = {d.hostname: d for d in self.devices}
        self.done = dict.fromkeys(self.jobs, 0)
        self.measured: dict[int, list[float]] = {j: [] for j in self.jobs}
        self.ready: dict[int, Candidate] = {}
        self.holder: dict[int, str] = {}  # experiment -> the device that ran its last round (Experiment.worker)
        self.service: dict[str, tuple[float, float]] = {}  # share key -> (decayed seconds, as of when)
        self.result = SimResult(policy, {}, 0.0, 0.0, 0.0)

    def candidate(self, job: Job, now: float) -> Candidate:
        seconds = self.measured[job.experiment_id]
        return Candidate(
            experiment_id=job.experiment_id,
            share_key=job.share_key,
            priority=job.priority,
            submitted=job.submitted,
            ready_since=now,
            rounds_left=len(job.durations) - self.done[job.experiment_id],
            round_seconds=sum(seconds) / len(seconds) if seconds else None,
            peak_mem_mb=job.peak_mem_mb if seconds else None,  # known once one round has run
        )

    def service_now(self, now: float) -> dict[str, float]:
        return {k: decayed(s, now - t, self.half_life) for k, (s, t) in self.service.items()}

    def dispatch(self, now: float, by: set[str] | frozenset[str] = frozenset()) -> None:
        """One scheduling pass, as ``schedule(by=)`` makes it: policies.order, then placement.place;
        affinity only for what the workers in ``by`` (those whose round just ended) hold."""
        if not self.ready or all(len(d.running) >= self.slots for d in self.devices):
            return
        view = QueueView(now, self.service_now(now), self.probe, self.scale.age_boost_seconds)
        rooms = [
            WorkerRoom(d.hostname, self.slots, self.scale.capacity_mb, 0, [r.known_mem for r in d.running])
            for d in self.devices
        ]
        free = sum(self.slots - len(d.running) for d in self.devices)
        holders = {j: h for j, h in self.holder.items() if h in by} if self.affinity else {}
        fleet = Fleet(rooms, free, holders, pack_slots=self.scale.slots, margin=self.scale.margin)

        def send(c: Candidate, to: str) -> bool:
            # The shared queue: the broker hands the round to a worker with a free slot.
            dev = self.by_name[to] if to else next((d for d in self.devices if len(d.running) < self.slots), None)
            if dev is None:
                return False
            self.start(dev, c, now, to)
            return True

        place(self.policy, order(self.policy, list(self.ready.values()), view), fleet, view, send, lambda room: True)

    def start(self, dev: _Device, c: Candidate, now: float, to: str) -> None:
        job = self.jobs[c.experiment_id]
        cost = self.switch_cost(dev, job)
        dev.running.append(
            _Running(job.experiment_id, job.durations[self.done[job.experiment_id]] + cost, now, c.peak_mem_mb)
        )
        self.holder[job.experiment_id] = dev.hostname
        del self.ready[c.experiment_id]
        self.result.trace.append((now, dev.hostname, job.experiment_id, to))
        self.result.max_in_flight = max(self.result.max_in_flight, len(dev.running))
        if len(dev.running) > 1:
            used = sum(self.jobs[r.job].peak_mem_mb for r in dev.running)
            self.result.max_packed_mb = max(self.result.max_packed_mb, used)

    def switch_cost(self, dev: _Device, job: Job) -> float:
        """Seconds ``dev`` spends before it can run ``job``'s next round (see the module docstring)."""
        j, done = job.experiment_id, self.done[job.experiment_id]
        hit = dev.held.get(j) == done
        _remember(dev.held, j, done, CACHE_SIZE)
        had_data = job.base in dev.data
        _remember(dev.data, job.base, None, DATA_CACHE)
        if hit:
            return 0.0
        m = self.costs.get(job.base, Measured(job.base, 0.0, 0.0, 0.0))
        if done > 0:
            self.result.switches += 1
        if self.switching == "free":
            return 0.0
        if self.switching == "replay":
            cost = m.build_s
            if done > 0:
                since = done // CHECKPOINT_EVERY * CHECKPOINT_EVERY
                self.result.rebuilds += 1
                self.result.replayed_rounds += done - since
                cost += sum(job.durations[since:done])
        else:
            cost = m.state_load_s + (0.0 if had_data else m.data_load_s)
        if done > 0:
            self.result.switch_seconds += cost
        return cost

    def rate(self, dev: _Device) -> float:
        # Processor sharing: packed rounds run at full speed while their demands fit in one device.
        return 1.0 / max(1.0, sum(self.jobs[r.job].demand for r in dev.running))

    def next_completion(self, now: float) -> float:
        times = [now + min(r.remaining for r in d.running) / self.rate(d) for d in self.devices if d.running]
        return min(times, default=math.inf)

    def account(self, dt: float) -> None:
        users: dict[str, float] = {}
        teams: dict[str, float] = {}
        for c in self.ready.values():
            users.setdefault(self.jobs[c.experiment_id].user, 0.0)
            teams.setdefault(c.share_key, 0.0)
        for dev in self.devices:
            if not dev.running:
                continue
            self.result.busy_seconds += dt
            rate = self.rate(dev)
            for r in dev.running:
                r.remaining -= dt * rate
                self.result.work_seconds += dt * rate
                job = self.jobs[r.job]
                users[job.user] = users.get(job.user, 0.0) + 1.0
                teams[job.share_key] = teams.get(job.share_key, 0.0) + 1.0
        if users:  # Jain over everyone with work in the system, the whole run long
            self.result.jain_user_weighted += jain(list(users.values())) * dt
            self.result.jain_team_weighted += jain(list(teams.values())) * dt
            self.result.present_seconds += dt

    def complete(self, now: float) -> set[str]:
        """Finish the rounds due at ``now``; returns the workers that finished one (they schedule next)."""
        finished: set[str] = set()
        for dev in self.devices:
            for r in [r for r in dev.running if r.remaining <= EPS * max(1.0, now)]:
                dev.running.remove(r)
                finished.add(dev.hostname)
                job = self.jobs[r.job]
                self.done[r.job] += 1
                if r.job in dev.held:
                    dev.held[r.job] = self.done[r.job]
                self.measured[r.job].append(now - r.started)
                served = self.service_now(now).get(job.share_key, 0.0)
                self.service[job.share_key] = (served + now - r.started, now)
                self.result.rounds_run += 1
                if self.done[r.job] == len(job.durations):
                    self.result.finish[r.job] = now
                else:
                    self.ready[r.job] = self.candidate(job, now)
        return finished


def _remember(cache: OrderedDict, key, value, size: int) -> None:
    cache.pop(key, None)
    cache[key] = value
    while len(cache) > size:
        cache.popitem(last=False)


def simulate(
    jobs: list[Job],
    policy: str,
    scale: Scale,
    probe_round_seconds: float,
    *,
    switching: str = "free",
    costs: dict[str, Measured] | None = None,
    affinity: bool = True,
) -> SimResult:
    """Run the workload on ``scale.workers`` devices under ``policy``; decisions at round boundaries.
    ``costs``: the measured workloads by name, whose load seconds a switch costs (``switching``);
    ``affinity=False`` places rounds as FedWeb did before issue 17 (any free worker)."""
    fleet = _Fleet(jobs, policy, scale, probe_round_seconds, switching=switching, costs=costs, affinity=affinity)
    arrivals = sorted(jobs, key=lambda j: (j.submitted, j.experiment_id))
    now, nxt, finished = 0.0, 0, set()
    while len(fleet.result.finish) < len(jobs):
        while nxt < len(arrivals) and arrivals[nxt].submitted <= now:
            fleet.ready[arrivals[nxt].experiment_id] = fleet.candidate(arrivals[nxt], arrivals[nxt].submitted)
            nxt += 1
        fleet.dispatch(now, by=finished)
        arrival = arrivals[nxt].submitted if nxt < len(arrivals) else math.inf
        t = min(arrival, fleet.next_completion(now))
        if math.isinf(t):
            raise RuntimeError(f"simulation stalled at t={now} under {policy}")
        fleet.account(t - now)
        now = t
        finished = fleet.complete(now)
    fleet.result.makespan = max(fleet.result.finish.values()) - min(j.submitted for j in jobs)
    return fleet.result


def summarise(result: SimResult, jobs: list[Job], workers: int) -> dict[str, float]:
    """Completion times, makespan, utilisation, fairness and switches of one simulated run."""
    completion = np.array([result.finish[j.experiment_id] - j.submitted for j in jobs])
    span, present = result.makespan, result.present_seconds
    return {
        "mean_completion_s": float(completion.mean()),
        "p95_completion_s": float(np.percentile(completion, 95)),
        "makespan_s": span,
        "utilisation": result.busy_seconds / (workers * span) if span else 0.0,
        "work_per_device_s": result.work_seconds / (workers * span) if span else 0.0,
        "jain_user": result.jain_user_weighted / present if present else 1.0,
        "jain_team": result.jain_team_weighted / present if present else 1.0,
        "rounds": result.rounds_run,
        "switches": result.switches,
        "rebuilds": result.rebuilds,
        "replayed_rounds": result.replayed_rounds,
        "switch_seconds": result.switch_seconds,
        "max_in_flight": result.max_in_flight,
        "max_packed_mb": result.max_packed_mb,
    }
