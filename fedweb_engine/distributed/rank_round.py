"""One federated round as any rank of a group runs it.

Every rank: sample the cohort and send the model down (the same draws everywhere), plan its share,
borrow its clients' rows from rank 0, train, then one all-reduce of a flat buffer that holds the
weighted update sum, the client algorithm's sums, the round's scalar sums, every client's local
loss and every rank's training seconds. The rows go back to rank 0, and every rank takes the same
server step (the same sums, the same generator), so the simulations stay equal without sending
the model. Rank 0 alone evaluates and commits the per-client state, and its result is the round's.
"""

from __future__ import annotations

import dataclasses
import time

import torch

from fedweb_engine.distributed.group import RankGroup
from fedweb_engine.distributed.share import lend_rows, plan_share, return_rows
from fedweb_engine.probes import memory as probes
from fedweb_engine.results.round_result import RoundResult
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.training.devices import synchronize
from fedweb_engine.training.dispatch import train_plans

SCALARS = ("loss", "weight", "samples", "unclipped")


def run_rank_round(sim: Simulation, group: RankGroup, labels: list[str] | None = None) -> RoundResult:
    """Run ``sim``'s next round as ``group.rank``; every rank of the group must call this together.
    ``labels`` (rank 0's: each rank's worker and device) go into the record's ``rank_devices``."""
    if sim.done:
        raise RuntimeError(f"all {sim.spec.rounds} rounds are done")
    if sim.collected is not None:
        raise RuntimeError(f"strategy {sim.spec.algorithm.name!r} needs every update in one process: use 1 rank")
    spec = sim.spec
    t0 = time.perf_counter()
    for d in sim.devices:
        probes.reset_peak(d)
    cohort = sim.sample_cohort(sim.rng)
    bytes_down = sim._broadcast() * len(cohort.clients)
    t_train = time.perf_counter()
    clip_norm = sim.dp.clip_norm if sim.dp else None
    plans = plan_share(
        sim.rng, cohort, sim.offsets, rank=group.rank, size=group.size, group_size=spec.compute.client_group_size,
        epochs=spec.local.epochs, batch_size=spec.local.batch_size,
    )  # fmt: skip
    stores = sim.client.stores if sim.client else {}
    lend_rows(group, cohort, stores, sim.residuals)
    stats = train_plans(
        sim.replicas, plans, sim.broadcast_weights, sim.uplink, sim.residuals, sim.update_sum, clip_norm,
        None, sim.client,
    )  # fmt: skip
    synchronize(sim.devices)
    trained = time.perf_counter() - t_train
    stats, seconds, reduce_seconds = _reduce(sim, group, stats, len(cohort.trained), trained)
    return_rows(group, cohort, stores, sim.residuals)
    result = sim.conclude_round(
        cohort, stats, bytes_down=bytes_down, t0=t0, t_train=t_train, clip_norm=clip_norm, evaluate=group.rank == 0
    )
    return dataclasses.replace(
        result,
        ranks=group.size,
        rank_train_seconds=[round(s, 4) for s in seconds],
        rank_devices=labels or [str(d) for d in sim.devices],
        allreduce_seconds=reduce_seconds,
        device=", ".join(sorted(set(labels))) if labels else result.device,
    )


def _reduce(
    sim: Simulation, group: RankGroup, stats: dict[str, torch.Tensor], trained: int, seconds: float
) -> tuple[dict[str, torch.Tensor], list[float], float]:
    """Sum this rank's share of the round into every rank's: one all-reduce of one flat buffer."""
    sums = [sim.update_sum, *(sim.client.sums[k] for k in sorted(sim.client.sums))] if sim.client else [sim.update_sum]
    P, n = sim.num_params, len(sums)
    scalars = [stats[k] for k in SCALARS] + ([sim.client.reported] if sim.client else [])
    buf = torch.zeros(P * n + len(scalars) + trained + group.size, device=group.wire)
    for i, s in enumerate(sums):
        buf[i * P : (i + 1) * P].copy_(s)
    at = P * n
    buf[at : at + len(scalars)] = torch.stack([s.to(buf.device, torch.float32) for s in scalars])
    at += len(scalars)
    losses = buf[at : at + trained]
    losses[group.rank :: group.size] = stats["client_losses"].to(buf.device)  # this rank's clients, in plan order
    buf[at + trained + group.rank] = seconds
    group.all_reduce_(torch.zeros(1, device=group.wire))  # a barrier: the skew between ranks is not the reduce's
    began = time.perf_counter()
    group.all_reduce_(buf)
    reduce_seconds = time.perf_counter() - began
    for i, s in enumerate(sums):
        s.copy_(buf[i * P : (i + 1) * P])
    at = P * n
    values = buf[at : at + len(scalars)].to(sim.device)
    out = {k: values[i] for i, k in enumerate(SCALARS)}
    if sim.client:
        sim.client.reported.copy_(values[len(SCALARS)])
    at += len(scalars)
    out["client_losses"] = buf[at : at + trained].to(sim.device)
    return out, buf[at + trained :].tolist(), reduce_seconds
