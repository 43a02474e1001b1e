"""One round split over several workers: plan, train a shard, sum the shards, conclude.

Every worker holding the simulation at the end of round ``r - 1`` (from its cache, or from the
checkpoint of round ``r - 1``: the round's published global model) plans round ``r`` alike:
:func:`plan_round` draws from a *copy* of the simulation's generator, so planning changes
nothing. A shard trains its clients from that plan and returns a weighted partial sum of their
decoded updates (:func:`train_shard`), written to a file (:func:`write_partial`). The one that
concludes the round sums the partials in shard order and steps the server
(:func:`conclude_round`); it alone moves the simulation on. The result equals an unsharded
round's up to the order of the floating-point sums.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.probes import memory as probes
from fedweb_engine.results.round_result import RoundResult
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.state.checkpoint import read_checkpoint, write_checkpoint
from fedweb_engine.training.dispatch import train_plans
from fedweb_engine.training.plan import Cohort, GroupPlan, plan_shards

STATS = ("loss", "weight", "samples")


@dataclass
class PlannedRound:
    """Round ``round``'s cohort, each shard's groups, the model as clients receive it, and the
    generator state after planning (what the simulation holds once the round is concluded)."""

    round: int
    cohort: Cohort
    shards: list[list[GroupPlan]]
    broadcast: torch.Tensor
    bytes_down: int
    rng_state: dict


@dataclass
class Partial:
    """One shard's work: Σ samples · decoded update over its clients, and its figures."""

    update_sum: torch.Tensor
    stats: dict[str, float]  # loss (Σ weight · mean loss), weight, samples
    train_seconds: float
    rss_mb: float
    vram_peak_mb: float | None


def plan_round(sim: Simulation, shards: int) -> PlannedRound:
    """Plan the simulation's next round cut into ``shards`` shards, leaving the simulation as it is."""
    if sim.done:
        raise RuntimeError(f"all {sim.spec.rounds} rounds are done")
    rng = np.random.default_rng()
    rng.bit_generator.state = copy.deepcopy(sim.rng.bit_generator.state)
    spec = sim.spec
    cohort = sim.sample_cohort(rng)
    plans = plan_shards(
        rng,
        cohort,
        sim.offsets,
        shards=shards,
        group_size=spec.compute.client_group_size,
        epochs=spec.local.epochs,
        batch_size=spec.local.batch_size,
    )
    broadcast = sim.broadcast_weights.clone()
    bytes_down = sim._broadcast(into=broadcast) * len(cohort.clients)
    return PlannedRound(sim.round + 1, cohort, plans, broadcast, bytes_down, rng.bit_generator.state)


def train_shard(sim: Simulation, planned: PlannedRound, index: int) -> Partial:
    """Train shard ``index`` of ``planned`` on this simulation's devices; the simulation is unchanged."""
    t0 = time.perf_counter()
    for d in sim.devices:
        probes.reset_peak(d)
    update_sum = torch.zeros_like(sim.global_flat)
    stats = train_plans(sim.replicas, planned.shards[index], planned.broadcast, sim.uplink, None, update_sum)
    # The round's scalar sums, one host sync per shard (per-client losses stay out: see runner).
    values = {k: float(v) for k, v in stats.items() if v.numel() == 1}
    mem = probes.probe_devices(sim.devices)
    return Partial(update_sum, values, time.perf_counter() - t0, mem["rss_mb"], mem["vram_peak_mb"])


def conclude_round(sim: Simulation, planned: PlannedRound, partials: list[Partial], *, t0: float) -> RoundResult:
    """Sum ``partials`` (all shards, in shard order), step the server and move the simulation to
    round ``planned.round``; ``t0`` (``time.perf_counter()`` terms) is when the round began."""
    if sim.round != planned.round - 1:
        raise RuntimeError(f"the simulation is at round {sim.round}, not {planned.round - 1}")
    if len(partials) != len(planned.shards):
        raise ValueError(f"{len(partials)} partial sums for {len(planned.shards)} shards")
    sim.update_sum.zero_()
    totals = dict.fromkeys(STATS, 0.0)
    for p in partials:
        sim.update_sum.add_(p.update_sum.to(sim.update_sum.device))
        for k in STATS:
            totals[k] += p.stats[k]
    sim.rng.bit_generator.state = planned.rng_state
    sim.broadcast_weights.copy_(planned.broadcast)
    stats = {k: torch.tensor(v, device=sim.device) for k, v in totals.items()}
    # The training happened elsewhere: the round's training time is its slowest shard's.
    t_train = time.perf_counter() - max(p.train_seconds for p in partials)
    result = sim.conclude_round(planned.cohort, stats, bytes_down=planned.bytes_down, t0=t0, t_train=t_train)
    peaks = [v for v in (result.vram_peak_mb, *(p.vram_peak_mb for p in partials)) if v is not None]
    return dataclasses.replace(
        result,
        train_seconds=max(p.train_seconds for p in partials),
        rss_mb=max([result.rss_mb, *(p.rss_mb for p in partials)]),  # the largest process of the round
        vram_peak_mb=max(peaks) if peaks else None,
    )


def write_partial(path: str | Path, partial: Partial) -> int:
    """Write a shard's partial sum atomically (the checkpoint writer); returns the file's size."""
    meta = {"stats": partial.stats, "train_seconds": partial.train_seconds, "rss_mb": partial.rss_mb,
            "vram_peak_mb": partial.vram_peak_mb}  # fmt: skip
    return write_checkpoint(path, {"update_sum": partial.update_sum}, meta)


def read_partial(path: str | Path) -> Partial:
    tensors, meta = read_checkpoint(path)
    return Partial(tensors["update_sum"], meta["stats"], meta["train_seconds"], meta["rss_mb"], meta["vram_peak_mb"])
