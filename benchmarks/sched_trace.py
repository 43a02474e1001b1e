"""The scheduling benchmark's seeded workload (see ``scheduling.py``): what was measured on this machine,
the fleet's shape, and the experiments drawn from them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Measured:
    """One real engine workload measured on this machine: mean s/round, per-round spread, memory."""

    base: str
    mean_seconds: float
    cv: float  # standard deviation / mean of its round times
    footprint_mb: float  # peak RSS during its rounds minus RSS before it was built
    data_load_s: float = 0.0  # building its federated dataset, uncached
    state_load_s: float = 0.0  # building its Simulation on cached data and loading a published round state
    build_s: float = 0.0  # building its Simulation from nothing (data included): the replay path's start


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


def jain(values: list[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one gets everything."""
    total, squares = sum(values), sum(v * v for v in values)
    return 1.0 if squares == 0 else total * total / (len(values) * squares)
