"""The scheduling benchmark's seeded workload and discrete-event fleet simulation (see ``scheduling.py``).

The simulation decides with ``orchestrator.policies.order`` and ``pack_fits``, the functions the live
dispatcher calls; nothing here re-implements a policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from orchestrator.policies import Candidate, QueueView, order, pack_fits

EPS = 1e-9


@dataclass(frozen=True)
class Measured:
    """One real engine workload measured on this machine: mean s/round, per-round spread, memory."""

    base: str
    mean_seconds: float
    cv: float  # standard deviation / mean of its round times
    footprint_mb: float  # peak RSS during its rounds minus RSS before it was built


@dataclass(frozen=True)
class Scale:
    """The fleet and the workload's shape."""

    name: str
    workers: int
    experiments: int
    users: int
    capacity_mb: float  # per device (an H100's 80 GB at fleet scale; a configured budget on CPU)
    size_max: float  # an experiment's size multiplier is log-uniform in [1, size_max]
    rounds: tuple[int, int]  # rounds per experiment, log-uniform in this range
    load: float = 1.2  # offered load: total work / (workers x arrival window)
    slots: int = 2  # FEDWEB_PACK_SLOTS
    margin: float = 0.1
    age_boost_seconds: float = 600.0  # FEDWEB_AGE_BOOST_SECONDS default


SCALES = {
    "small": Scale("small", workers=2, experiments=30, users=5, capacity_mb=2048.0, size_max=6.0, rounds=(2, 16)),
    "full": Scale("full", workers=64, experiments=1000, users=40, capacity_mb=81920.0, size_max=40.0, rounds=(5, 120)),
}


@dataclass(frozen=True)
class Job:
    """One experiment of the workload: its owner, arrival, and the true cost of each of its rounds."""

    experiment_id: int
    user: str
    share_key: str
    priority: int
    submitted: float
    durations: tuple[float, ...]  # seconds of each round when it runs alone on a device
    peak_mem_mb: float
    demand: float  # fraction of a device's compute one round uses alone (packing model, assumed)
    base: str = ""  # the measured workload it was drawn from
    size: float = 1.0  # its size multiplier over that workload

    @property
    def work(self) -> float:
        return sum(self.durations)


def generate(scale: Scale, measured: list[Measured], seed: int) -> list[Job]:
    """A seeded workload: experiments of different lengths and sizes from several users, Poisson arrivals."""
    rng = np.random.default_rng(seed)
    user_weights = 1.0 / np.arange(1, scale.users + 1)  # a few heavy users, many light ones (Zipf)
    user_weights /= user_weights.sum()
    teams = {u: f"team:{u // 3}" for u in range(scale.users) if u % 3 != 0}  # two of three users sit in a team
    mem_scale = 0.7 * scale.capacity_mb / (max(m.footprint_mb for m in measured) * scale.size_max)
    drafts = []
    for i in range(scale.experiments):
        base = measured[int(rng.integers(len(measured)))]
        size = math.exp(rng.uniform(0.0, math.log(scale.size_max)))
        lo, hi = scale.rounds
        rounds = int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        jitter = np.clip(1.0 + base.cv * rng.standard_normal(rounds), 0.2, None)
        user = int(rng.choice(scale.users, p=user_weights))
        drafts.append(
            {
                "experiment_id": i + 1,
                "user": f"user:{user}",
                "share_key": teams.get(user, f"user:{user}"),
                "priority": int(rng.choice([0, 0, 0, 1, 2])),
                "durations": tuple(float(x) for x in base.mean_seconds * size * jitter),
                "peak_mem_mb": base.footprint_mb * size * mem_scale,
                "demand": float(min(1.0, 0.2 + 0.8 * math.sqrt(size / scale.size_max))),
                "base": base.base,
                "size": size,
            }
        )
    total_work = sum(sum(d["durations"]) for d in drafts)
    window = total_work / (scale.workers * scale.load)
    arrivals = np.cumsum(rng.exponential(window / scale.experiments, scale.experiments))
    arrivals -= arrivals[0]  # the first experiment arrives at t = 0
    return [Job(submitted=float(t), **d) for t, d in zip(arrivals, drafts, strict=True)]


@dataclass
class _Running:
    job: int
    remaining: float  # alone-speed seconds of work left
    started: float
    known_mem: float | None  # what the scheduler knew of its memory when it started


@dataclass
class SimResult:
    """What one policy did to one workload."""

    policy: str
    finish: dict[int, float]
    busy_seconds: float  # device-seconds with at least one round in flight
    work_seconds: float  # alone-speed seconds of rounds completed
    jain_weighted: float  # sum of Jain's index x dt over contended intervals
    contended_seconds: float
    makespan: float
    max_packed_mb: float = 0.0  # the most true memory ever in flight on one device with 2+ rounds
    max_in_flight: int = 0
    rounds_run: int = 0
    trace: list[tuple[float, int, int]] = field(default_factory=list)  # (start, device, experiment) of each round


def jain(values: list[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one gets everything."""
    total, squares = sum(values), sum(v * v for v in values)
    return 1.0 if squares == 0 else total * total / (len(values) * squares)


class _Fleet:
    def __init__(self, jobs: list[Job], policy: str, scale: Scale, probe: float) -> None:
        self.jobs = {j.experiment_id: j for j in jobs}
        self.policy, self.scale, self.probe = policy, scale, probe
        self.slots = scale.slots if policy == "pack" else 1
        self.devices: list[list[_Running]] = [[] for _ in range(scale.workers)]
        self.done = dict.fromkeys(self.jobs, 0)
        self.measured: dict[int, list[float]] = {j: [] for j in self.jobs}
        self.ready: dict[int, Candidate] = {}
        self.service: dict[str, float] = {}
        self.result = SimResult(policy, {}, 0.0, 0.0, 0.0, 0.0, 0.0)

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

    def pick_device(self, c: Candidate) -> int | None:
        # Under pack a round whose memory is known goes beside others where it fits (fullest device first),
        # keeping idle devices for rounds that must run alone (unknown memory, or too big to share).
        if self.slots > 1 and c.peak_mem_mb is not None:
            shared = [i for i, d in enumerate(self.devices) if 0 < len(d) < self.slots]
            shared.sort(key=lambda i: (-len(self.devices[i]), i))
            for i in shared:
                if pack_fits([r.known_mem for r in self.devices[i]], c, self.scale.capacity_mb, self.scale.margin):
                    return i
        return next((i for i, d in enumerate(self.devices) if not d), None)

    def dispatch(self, now: float) -> None:
        if not self.ready or all(len(d) >= self.slots for d in self.devices):
            return
        view = QueueView(now, dict(self.service), self.probe, self.scale.age_boost_seconds)
        for c in order(self.policy, list(self.ready.values()), view):
            dev = self.pick_device(c)
            if dev is None:
                if all(len(d) >= self.slots for d in self.devices):
                    return
                continue
            job = self.jobs[c.experiment_id]
            self.devices[dev].append(
                _Running(job.experiment_id, job.durations[self.done[job.experiment_id]], now, c.peak_mem_mb)
            )
            del self.ready[c.experiment_id]
            self.result.trace.append((now, dev, job.experiment_id))
            self.note_packing(self.devices[dev])

    def note_packing(self, dev: list[_Running]) -> None:
        self.result.max_in_flight = max(self.result.max_in_flight, len(dev))
        if len(dev) > 1:
            used = sum(self.jobs[r.job].peak_mem_mb for r in dev)
            self.result.max_packed_mb = max(self.result.max_packed_mb, used)

    def rate(self, dev: list[_Running]) -> float:
        # Processor sharing: packed rounds run at full speed while their demands fit in one device.
        return 1.0 / max(1.0, sum(self.jobs[r.job].demand for r in dev))

    def next_completion(self, now: float) -> float:
        times = [now + min(r.remaining for r in d) / self.rate(d) for d in self.devices if d]
        return min(times, default=math.inf)

    def account(self, dt: float) -> None:
        waiting_keys = {c.share_key for c in self.ready.values()}
        running: dict[str, float] = dict.fromkeys(waiting_keys, 0.0)
        for dev in self.devices:
            if dev:
                self.result.busy_seconds += dt
                rate = self.rate(dev)
                for r in dev:
                    r.remaining -= dt * rate
                    self.result.work_seconds += dt * rate
                    key = self.jobs[r.job].share_key
                    if key in running:
                        running[key] += 1.0
        if len(running) >= 2 and sum(running.values()) > 0:
            self.result.jain_weighted += jain(list(running.values())) * dt
            self.result.contended_seconds += dt

    def complete(self, now: float) -> None:
        for dev in self.devices:
            for r in [r for r in dev if r.remaining <= EPS * max(1.0, now)]:
                dev.remove(r)
                job = self.jobs[r.job]
                self.done[r.job] += 1
                self.measured[r.job].append(now - r.started)
                self.service[job.share_key] = self.service.get(job.share_key, 0.0) + (now - r.started)
                self.result.rounds_run += 1
                if self.done[r.job] == len(job.durations):
                    self.result.finish[r.job] = now
                else:
                    self.ready[r.job] = self.candidate(job, now)


def simulate(jobs: list[Job], policy: str, scale: Scale, probe_round_seconds: float) -> SimResult:
    """Run the workload on ``scale.workers`` devices under ``policy``; decisions at round boundaries."""
    fleet = _Fleet(jobs, policy, scale, probe_round_seconds)
    arrivals = sorted(jobs, key=lambda j: (j.submitted, j.experiment_id))
    now, nxt = 0.0, 0
    while len(fleet.result.finish) < len(jobs):
        while nxt < len(arrivals) and arrivals[nxt].submitted <= now:
            fleet.ready[arrivals[nxt].experiment_id] = fleet.candidate(arrivals[nxt], arrivals[nxt].submitted)
            nxt += 1
        fleet.dispatch(now)
        arrival = arrivals[nxt].submitted if nxt < len(arrivals) else math.inf
        t = min(arrival, fleet.next_completion(now))
        if math.isinf(t):
            raise RuntimeError(f"simulation stalled at t={now} under {policy}")
        fleet.account(t - now)
        now = t
        fleet.complete(now)
    fleet.result.makespan = max(fleet.result.finish.values()) - min(j.submitted for j in jobs)
    return fleet.result


def summarise(result: SimResult, jobs: list[Job], workers: int) -> dict[str, float]:
    """Mean and p95 completion time, makespan, utilisation and fairness of one simulated run."""
    completion = np.array([result.finish[j.experiment_id] - j.submitted for j in jobs])
    span = result.makespan
    return {
        "mean_completion_s": float(completion.mean()),
        "p95_completion_s": float(np.percentile(completion, 95)),
        "makespan_s": span,
        "utilisation": result.busy_seconds / (workers * span) if span else 0.0,
        "work_per_device_s": result.work_seconds / (workers * span) if span else 0.0,
        "jain": result.jain_weighted / result.contended_seconds if result.contended_seconds else 1.0,
        "rounds": result.rounds_run,
        "max_in_flight": result.max_in_flight,
        "max_packed_mb": result.max_packed_mb,
    }
