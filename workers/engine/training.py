"""Client training for one round: a trainer per device, and the dispatch of planned groups to them.

Used in-process by :class:`workers.engine.runner.Simulation` and, with process isolation, by the
child in :mod:`workers.engine.isolation_child`: both call :func:`train_plans`, so an isolated
round does exactly the arithmetic of an in-process one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from workers.engine.client import (
    GroupOutput,
    LocalConfig,
    SequentialTrainer,
    VectorTrainer,
    can_vectorise,
    vectorises_well_on_cpu,
)
from workers.engine.codecs import Codec, compress_with_feedback
from workers.engine.data.base import FederatedData
from workers.engine.plan import GroupPlan, bucket
from workers.engine.privacy import clip_rows_
from workers.engine.spec import Spec, SpecError
from workers.engine.strategies.aggregate import accumulate_


@dataclass
class DeviceReplica:
    """What one device needs to train client groups: a model template, its data and a trainer."""

    device: torch.device
    data: FederatedData
    trainer: VectorTrainer | SequentialTrainer
    payload: torch.Tensor | None = None  # [slots, L] uint8, reused for every group's uplink
    decoded: torch.Tensor | None = None  # [slots, P] float32


def choose_vectorised(spec: Spec, model: torch.nn.Module, devices: Sequence[torch.device]) -> bool:
    """Vectorised or sequential client training; ``auto`` picks what is faster where it runs.

    On a GPU vectorising always pays (many small kernels become a few large ones). On a CPU
    it pays for dense models, where per-client Python overhead dominates, but not for
    convolutions: vmap turns them into grouped convolutions, which oneDNN runs about half as
    fast per sample as one client's batch (measured on quickstart: 0.44x vs 1.0x of a
    plain loop), and attention has no vmap batching rule on CPU, so ``auto`` trains CNNs and
    language models on a CPU one client at a time.
    """
    mode = spec.compute.training
    vmappable = can_vectorise(model)
    if mode == "vectorized" and not vmappable:
        raise SpecError("compute.training", f"model {spec.model.name} cannot be vectorised; use sequential or auto")
    if mode != "auto":
        return mode == "vectorized"
    on_cpu = all(d.type == "cpu" for d in devices)
    return vmappable and (not on_cpu or vectorises_well_on_cpu(model))


def make_replica(
    spec: Spec, model: torch.nn.Module, device: torch.device, data: FederatedData, vectorised: bool
) -> DeviceReplica:
    """A trainer for ``device`` with its own copy of the model template."""
    cfg = LocalConfig(
        lr=spec.local.lr,
        momentum=spec.local.momentum,
        weight_decay=spec.local.weight_decay,
        mu=spec.algorithm.mu,
        precision=spec.compute.precision,
    )
    template = copy.deepcopy(model).to(device)
    slots = max_slots(spec)
    if vectorised:
        trainer = VectorTrainer(template, slots, cfg, device)
        trainer.compile = spec.compute.compile
    else:
        trainer = SequentialTrainer(template, slots, cfg, device)
    return DeviceReplica(device=device, data=data, trainer=trainer)


def max_slots(spec: Spec) -> int:
    """The most client slots any round of ``spec`` can need: buffers are sized once, to this."""
    G = spec.compute.client_group_size
    largest = max(spec.participation.schedule or [spec.participation.clients_per_round])
    return bucket(min(largest, G), G)


def train_plans(
    replicas: Sequence[DeviceReplica],
    plans: Sequence[GroupPlan],
    broadcast_weights: torch.Tensor,
    uplink: Codec,
    residuals: torch.Tensor | None,
    update_sum: torch.Tensor,
    clip_norm: float | None = None,
) -> dict[str, torch.Tensor]:
    """Train each planned group (round-robin over the replicas' devices) from ``broadcast_weights``
    (the model as clients received it), encode every client's update to real bytes, decode it as
    the server would and sum it, weighted by the client's samples, into ``update_sum``.

    With ``clip_norm`` (DP-FedAvg) each decoded update is clipped to that norm and weighted 1
    instead of by its samples (see :mod:`workers.engine.privacy`).

    Returns device scalars (loss, weight, samples, unclipped) and ``client_losses``, the mean local
    loss of each sampled client (``[K]``, NaN where not aggregated): the caller syncs once per round.
    """
    device = update_sum.device
    update_sum.zero_()
    loss = torch.zeros((), device=device)
    weight = torch.zeros((), device=device)
    samples = torch.zeros((), device=device)
    unclipped = torch.zeros((), device=device)
    client_losses = []
    for k, plan in enumerate(plans):
        replica = replicas[k % len(replicas)]
        start = broadcast_weights.to(replica.device, non_blocking=True)
        out = replica.trainer.train(start, plan, replica.data)
        decoded = _uplink(uplink, residuals, out, plan, replica)
        w = plan.weights.to(device)
        if clip_norm is not None:
            norms = clip_rows_(decoded, clip_norm).to(device)
            w = (w > 0).to(w.dtype)  # one client, one vote: its influence is bounded by C alone
            unclipped += ((norms <= clip_norm).to(w.dtype) * w).sum()
        accumulate_(update_sum, decoded.to(device, non_blocking=True), w)
        client_loss = out.loss_sum.to(device) / out.steps.to(device).clamp(min=1)
        loss += (client_loss * w).sum()
        weight += w.sum()
        samples += out.samples.to(device)
        # NaN marks a client that was not aggregated; filtering on the host avoids a sync here.
        client_losses.append(torch.where(w > 0, client_loss, torch.nan)[: plan.real])
    losses = torch.cat(client_losses) if client_losses else torch.zeros(0, device=device)
    return {"loss": loss, "weight": weight, "samples": samples, "unclipped": unclipped, "client_losses": losses}


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
