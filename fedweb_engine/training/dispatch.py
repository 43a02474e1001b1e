"""Client training for one round: a trainer per device, and the dispatch of planned groups to them.

Used in-process by :class:`fedweb_engine.simulation.runner.Simulation` and, with process isolation, by the
child in :mod:`fedweb_engine.isolation.child`: both call :func:`train_plans`, so an isolated
round does exactly the arithmetic of an in-process one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from fedweb_engine.algorithms import ClientRound, GroupContext
from fedweb_engine.communication.codecs import Codec, compress_with_feedback
from fedweb_engine.data.base import FederatedData
from fedweb_engine.privacy.mechanism import clip_rows_
from fedweb_engine.spec.schema import Spec, SpecError
from fedweb_engine.strategies.aggregate import accumulate_
from fedweb_engine.training import vmap_probe
from fedweb_engine.training.client import SequentialTrainer, VectorTrainer
from fedweb_engine.training.flat import GroupOutput
from fedweb_engine.training.plan import GroupPlan
from fedweb_engine.training.vectorise import can_vectorise, vectorises_well_on_cpu


@dataclass
class DeviceReplica:
    """What one device needs to train client groups: a model template, its data and a trainer."""

    device: torch.device
    data: FederatedData
    trainer: VectorTrainer | SequentialTrainer
    payload: torch.Tensor | None = None  # [slots, L] uint8, reused for every group's uplink
    decoded: torch.Tensor | None = None  # [slots, P] float32


@dataclass
class Collected:
    """The round's decoded client updates, one row per aggregated client, for the strategies that
    need every update (``needs_updates``). Allocated once per simulation for the largest cohort
    the run can have, so memory stays flat however cohorts vary; a round fills a prefix."""

    updates: torch.Tensor  # [max cohort, P] float32, on the server's device
    weights: torch.Tensor  # [max cohort] float32: each row's sample count

    @classmethod
    def for_spec(cls, spec: Spec, num_params: int, device: torch.device) -> Collected:
        rows = max(spec.participation.schedule or [spec.participation.clients_per_round])
        return cls(torch.zeros(rows, num_params, device=device), torch.zeros(rows, device=device))


def choose_vectorised(
    spec: Spec,
    model: torch.nn.Module,
    devices: Sequence[torch.device],
    *,
    sample: tuple[torch.Tensor, torch.Tensor] | None = None,
    notes: list[str] | None = None,
) -> bool:
    """Vectorised or sequential client training; ``auto`` picks what is faster where it runs.

    On a GPU vectorising always pays (many small kernels become a few large ones). On a CPU
    it pays for dense models, where per-client Python overhead dominates, but not for
    convolutions: vmap turns them into grouped convolutions, which oneDNN runs about half as
    fast per sample as one client's batch (measured on quickstart: 0.44x vs 1.0x of a
    plain loop); language models have not been measured faster vectorised on a CPU, so
    ``auto`` trains CNNs and language models on a CPU one client at a time.

    A model that does not declare ``vmappable`` (a plugin's) is probed with ``sample`` (a few
    training rows) when vectorising would be chosen; under ``auto`` a failed probe falls back to
    sequential training and its reason is appended to ``notes`` (the experiment's log).
    """
    mode = spec.compute.training
    if mode == "sequential":
        return False
    on_cpu = all(d.type == "cpu" for d in devices)
    if mode == "auto" and on_cpu and not vectorises_well_on_cpu(model):
        return False
    declared = vmap_probe.declared_vmappable(model, spec.model.name)
    reason = "it is marked as not vmappable" if declared is False else None
    if declared is None and sample is None:
        reason = None if can_vectorise(model) else "it has buffers"
    elif declared is None:
        reason = vmap_probe.probe(model, *sample, devices[0], spec.compute.precision)
    if reason is None:
        return True
    if mode == "vectorized":
        why = f"model {spec.model.name} cannot be vectorised ({reason}); use sequential or auto"
        raise SpecError("compute.training", why)
    if declared is None and notes is not None:
        notes.append(f"training sequentially: model {spec.model.name} cannot be vectorised: {reason}")
    return False


def train_plans(
    replicas: Sequence[DeviceReplica],
    plans: Sequence[GroupPlan],
    broadcast_weights: torch.Tensor,
    uplink: Codec,
    residuals: torch.Tensor | None,
    update_sum: torch.Tensor,
    clip_norm: float | None = None,
    collect: Collected | None = None,
    client: ClientRound | None = None,
) -> dict[str, torch.Tensor]:
    """Train each planned group (round-robin over the replicas' devices) from ``broadcast_weights``
    (the model as clients received it), encode every client's update to real bytes, decode it as
    the server would and sum it, weighted by the client's samples, into ``update_sum``.

    With ``clip_norm`` (DP-FedAvg) each decoded update is clipped to that norm and weighted 1
    instead of by its samples (see :mod:`fedweb_engine.privacy.mechanism`).

    With ``collect`` the decoded updates of the aggregated clients are written, in plan order,
    into its rows instead of being summed (``update_sum`` stays zero), and ``rows`` (a host int
    tensor) says how many were written.

    With ``client`` (a client algorithm that keeps state or returns values beside the update) each
    group's state rows are gathered from its stores, the hooks run, the rows of the clients that
    reported are scattered back and what they returned is summed into ``client.sums``.

    Returns device scalars (loss, weight, samples, unclipped) and ``client_losses``, the mean local
    loss of each sampled client (``[K]``, NaN where not aggregated): the caller syncs once per round.
    """
    device = update_sum.device
    update_sum.zero_()
    sums = [_DeviceSums.on(r.device, update_sum if i == 0 and r.device == device else None, update_sum)
            for i, r in enumerate(replicas)]  # fmt: skip
    # Each device's copy of what it needs for the whole round, made once, not per group: the model
    # clients received and every group's weights (one host-to-device copy per device).
    starts = [broadcast_weights.to(r.device, non_blocking=True) for r in replicas]
    all_weights = torch.cat([p.weights for p in plans]) if plans else torch.zeros(0)
    weights_on = [all_weights.to(r.device, non_blocking=True) for r in replicas]
    client_losses = []
    rows = 0
    first = 0
    if client is not None:
        client.zero_()
        server_on = [{k: v.to(r.device, non_blocking=True) for k, v in client.server.items()} for r in replicas]
    for k, plan in enumerate(plans):
        j = k % len(replicas)
        replica, acc = replicas[j], sums[j]
        slots = len(plan.weights)
        w = weights_on[j][first : first + slots]
        first += slots
        if client is None:
            out = replica.trainer.train(starts[j], plan, replica.data)
        else:
            out = _train_with_state(client, server_on[j], replica, starts[j], plan, w)
        decoded = _uplink(uplink, residuals, out, plan, replica)
        if clip_norm is not None:
            norms = clip_rows_(decoded, clip_norm)
            w = (w > 0).to(w.dtype)  # one client, one vote: its influence is bounded by C alone
            acc.unclipped += ((norms <= clip_norm).to(w.dtype) * w).sum()
        if collect is None:
            accumulate_(acc.update_sum, decoded, w)
        else:
            rows = _collect_rows(collect, rows, decoded, plan)
        client_loss = out.loss_sum / out.steps.clamp(min=1)
        acc.loss += (client_loss * w).sum()
        acc.weight += w.sum()
        acc.samples += out.samples
        # NaN marks a client that was not aggregated; filtering on the host avoids a sync here.
        client_losses.append(torch.where(w > 0, client_loss, torch.nan)[: plan.real])
    # One reduction per round: each device's partial sums join the server's once (Blink's
    # lesson: devices that wait for each other every group run in lockstep).
    stats = {key: torch.zeros((), device=device) for key in _DeviceSums.SCALARS}
    for acc in sums:
        if acc.update_sum is not update_sum:
            update_sum.add_(acc.update_sum.to(device))
        for key in _DeviceSums.SCALARS:
            stats[key] += getattr(acc, key).to(device)
    losses = torch.cat([c.to(device) for c in client_losses]) if client_losses else torch.zeros(0, device=device)
    stats = {**stats, "client_losses": losses}
    return stats if collect is None else {**stats, "rows": torch.tensor(rows)}


@dataclass
class _DeviceSums:
    """One device's share of a round: Σ weight · decoded update and the scalar sums, kept on that
    device until the round's single reduction."""

    SCALARS = ("loss", "weight", "samples", "unclipped")

    update_sum: torch.Tensor
    loss: torch.Tensor
    weight: torch.Tensor
    samples: torch.Tensor
    unclipped: torch.Tensor

    @classmethod
    def on(cls, device: torch.device, update_sum: torch.Tensor | None, like: torch.Tensor) -> _DeviceSums:
        """Sums on ``device``; ``update_sum`` is the server's own buffer for the server's first
        replica (no extra [P] there, and one device sums exactly as before)."""
        total = update_sum if update_sum is not None else torch.zeros(like.shape, device=device)
        return cls(total, *(torch.zeros((), device=device) for _ in cls.SCALARS))


def _train_with_state(
    client: ClientRound,
    server: dict[str, torch.Tensor],
    replica: DeviceReplica,
    start: torch.Tensor,
    plan: GroupPlan,
    w: torch.Tensor,
) -> GroupOutput:
    """Train one group with its clients' state rows; keep the rows and sums of the clients that report."""
    ids = plan.clients
    ctx = GroupContext(server, {name: store.gather(ids, replica.device) for name, store in client.stores.items()})
    out = replica.trainer.train(start, plan, replica.data, ctx)
    returned = client.algorithm.finish(out.delta, out.steps, ctx)
    reports = (w > 0).to(out.delta.dtype)
    for name, total in client.sums.items():
        part = torch.zeros_like(out.delta[0]) if total.device != out.delta.device else total
        accumulate_(part, returned[name], reports)
        if part is not total:
            total.add_(part.to(total.device))
    client.reported += reports.sum().to(client.reported.device)
    # Real slots are the clients that trained and report (padding repeats a real id: never kept).
    real = plan.real
    for name, store in client.stores.items():
        store.scatter(ids[:real], ctx.state[name][:real])
    return out


def _collect_rows(collect: Collected, first: int, decoded: torch.Tensor, plan: GroupPlan) -> int:
    """Copy the group's aggregated clients' rows (real slots with weight > 0: never padding)
    into ``collect`` from row ``first``; return the next free row. Decided on the host from the
    plan's CPU weights, so it costs no device sync."""
    keep = torch.nonzero(plan.weights[: plan.real] > 0).flatten()
    n = len(keep)
    rows = decoded[:n] if n == plan.real else decoded[keep.to(decoded.device)]
    collect.updates[first : first + n].copy_(rows, non_blocking=True)
    collect.weights[first : first + n].copy_(plan.weights[keep], non_blocking=True)
    return first + n


def _uplink(
    codec: Codec, residuals: torch.Tensor | None, out: GroupOutput, plan: GroupPlan, replica: DeviceReplica
) -> torch.Tensor:
    """Encode a group's updates to real bytes and decode them; top-k error feedback per client."""
    if residuals is None:
        slots = out.delta.shape[0]
        if replica.payload is None:  # sized once, for the largest group this run can have
            rows = replica.trainer.group_size
            replica.payload = torch.empty(rows, codec.payload_bytes(), dtype=torch.uint8, device=out.delta.device)
            replica.decoded = torch.empty(rows, codec.num_params, device=out.delta.device)
        payload = codec.encode(out.delta, out=replica.payload[:slots])
        return codec.decode(payload, check=False, out=replica.decoded[:slots])
    ids = plan.clients.to(residuals.device)
    residual = residuals[ids].to(out.delta.device)
    _payload, decoded, new_residual = compress_with_feedback(codec, out.delta, residual)
    real = plan.real
    residuals[ids[:real]] = new_residual[:real].to(residuals.device)
    return decoded
