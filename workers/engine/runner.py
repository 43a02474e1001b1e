"""The simulation loop: one federated round at a time, with memory that stays flat.

A :class:`Simulation` owns everything that persists between rounds, allocated once when it is
built: the global model as one flat vector on the device, client-weight buffers sized by
``compute.client_group_size``, the server optimizer's state, the codecs' error-feedback state
and one NumPy generator that draws every random choice. A round then only reuses those buffers.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from workers.engine import probes
from workers.engine.client import (
    GroupOutput,
    LocalConfig,
    SequentialTrainer,
    VectorTrainer,
    bind_flat,
    can_vectorise,
    task_loss,
    vectorises_well_on_cpu,
)
from workers.engine.codecs import Codec, compress_with_feedback, make_codec
from workers.engine.data import build_data
from workers.engine.data.base import FederatedData, as_input
from workers.engine.devices import describe, fits_on, resolve_devices
from workers.engine.models import build_model
from workers.engine.plan import Cohort, GroupPlan, bucket, plan_group, sample_cohort
from workers.engine.result import RoundResult
from workers.engine.spec import Spec, SpecError
from workers.engine.strategies import build_strategy
from workers.engine.strategies.aggregate import accumulate_

CHECKPOINT_FORMAT = 1

Callback = Callable[[RoundResult], bool | None]


@dataclass
class _Replica:
    """What one device needs to train client groups: a model template, its data and a trainer."""

    device: torch.device
    data: FederatedData
    trainer: VectorTrainer | SequentialTrainer
    payload: torch.Tensor | None = None  # [slots, L] uint8, reused for every group's uplink
    decoded: torch.Tensor | None = None  # [slots, P] float32


class Simulation:
    """A federated-learning run: ``run_round()`` advances it by one round.

    ``device`` overrides ``spec.compute.device``. ``devices`` (a list of torch devices) overrides
    both; tests use it to drive the multi-device path on CPU.
    """

    def __init__(
        self,
        spec: Spec,
        *,
        device: str | None = None,
        devices: Sequence[torch.device] | None = None,
        callbacks: Iterable[Callback] = (),
        data_root: str | Path | None = None,  # where data.path may lead (see data.paths.confine)
    ):
        self.spec = spec
        self.callbacks = list(callbacks)
        self.devices = list(devices) if devices else resolve_devices(device or spec.compute.device)
        self.device = self.devices[0]
        self.device_name = describe(self.devices)
        self.round = 0
        self.rng = np.random.default_rng(spec.seed)

        data = build_data(spec.data, spec.seed, data_root=data_root)
        self.input_shape = data.input_shape
        # Copies, not views: process isolation moves tensor storage into shared memory, which
        # would leave a NumPy view pointing at freed memory.
        self.sizes = data.client_sizes().numpy().copy()
        self.offsets = data.offsets.numpy().copy()
        self.model = self._build_model(data)
        self.num_params = sum(p.numel() for p in self.model.parameters())
        self.layout = [p.numel() for p in self.model.parameters()]
        # The global model *is* this flat vector: the eval model's parameters are views of it.
        self.global_flat = torch.empty(self.num_params, device=self.device)
        bind_flat(self.model, self.global_flat)
        self.vectorised = self._choose_training_mode()
        self.replicas = [self._replica(d, data) for d in self.devices]
        self.test_x, self.test_y = self.replicas[0].data.x_test, self.replicas[0].data.y_test

        comm = spec.communication
        self.uplink = make_codec(comm.uplink, self.layout, comm.topk_ratio)
        self.downlink = make_codec(comm.downlink, self.layout, comm.topk_ratio)
        self.received = self.global_flat.clone()  # the model clients hold after the downlink
        self.residuals = self._residual_store(data.num_clients)
        self.strategy = build_strategy(spec.algorithm, self.num_params, self.device)
        self.acc = torch.zeros(self.num_params, device=self.device)

    # -- construction helpers -----------------------------------------------------------------

    def _build_model(self, data: FederatedData) -> torch.nn.Module:
        generator = torch.Generator().manual_seed(self.spec.seed)
        model = build_model(self.spec.model, data.input_shape, data.num_classes, generator=generator)
        return model.to(self.device).eval()

    def _choose_training_mode(self) -> bool:
        """Vectorised or sequential client training; ``auto`` picks what is faster where it runs.

        On a GPU vectorising always pays (many small kernels become a few large ones). On a CPU
        it pays for dense models, where per-client Python overhead dominates, but not for
        convolutions: vmap turns them into grouped convolutions, which oneDNN runs about half as
        fast per sample as one client's batch (measured on quickstart: 0.44x vs 1.0x of a
        plain loop), and attention has no vmap batching rule on CPU, so ``auto`` trains CNNs and
        language models on a CPU one client at a time.
        """
        mode = self.spec.compute.training
        vmappable = can_vectorise(self.model)
        if mode == "vectorized" and not vmappable:
            raise SpecError(
                "compute.training", f"model {self.spec.model.name} cannot be vectorised; use sequential or auto"
            )
        if mode != "auto":
            return mode == "vectorized"
        on_cpu = all(d.type == "cpu" for d in self.devices)
        return vmappable and (not on_cpu or vectorises_well_on_cpu(self.model))

    def _replica(self, device: torch.device, data: FederatedData) -> _Replica:
        on_device = data.to(device) if fits_on(device, data.nbytes()) else data.to(device, pin=True)
        return make_replica(self.spec, self.model, device, on_device, self.vectorised)

    def _residual_store(self, num_clients: int) -> torch.Tensor | None:
        comm = self.spec.communication
        if not (comm.uplink == "topk" and comm.error_feedback):
            return None
        # One residual row per client, allocated once: memory does not grow as clients appear.
        nbytes = num_clients * self.num_params * 4
        where = self.device if fits_on(self.device, nbytes, share=0.25) else torch.device("cpu")
        return torch.zeros(num_clients, self.num_params, device=where)

    # -- the round ----------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.round >= self.spec.rounds

    def set_client_group_size(self, n: int) -> None:
        """Rebuild the trainers with a smaller group (after a CUDA out-of-memory error)."""
        self.spec = self.spec.replace(compute={"client_group_size": max(1, n)})
        self.replicas = [self._replica(r.device, r.data) for r in self.replicas]
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def run_round(self) -> RoundResult:
        """Sample, train, encode, aggregate, step the server, evaluate when due."""
        if self.done:
            raise RuntimeError(f"all {self.spec.rounds} rounds are done")
        t0 = time.perf_counter()
        for d in self.devices:
            probes.reset_peak(d)
        r = self.round + 1
        spec = self.spec
        cohort = sample_cohort(
            self.rng,
            self.sizes,
            spec.cohort_size(r),
            epochs=spec.local.epochs,
            batch_size=spec.local.batch_size,
            straggler_fraction=spec.heterogeneity.straggler_fraction,
            straggler_policy=spec.heterogeneity.straggler_policy,
            dropout=spec.heterogeneity.dropout,
        )
        bytes_down = self._broadcast() * len(cohort.clients)
        t_train = time.perf_counter()
        stats = self._train_cohort(cohort)
        total_weight = float(stats["weight"])
        if total_weight > 0:
            self.strategy.step(self.global_flat, self.acc.div_(total_weight))
        _synchronize(self.devices)
        train_seconds = time.perf_counter() - t_train
        test_loss = test_acc = None
        if r % spec.evaluation.every == 0 or r == spec.rounds:
            test_loss, test_acc = self.evaluate()
        self.round = r
        mem = probes.probe(self.device)
        completed = len(cohort.trained)
        result = RoundResult(
            round=r,
            participants=len(cohort.clients),
            completed=completed,
            stragglers=cohort.stragglers,
            dropped=cohort.dropped,
            train_loss=float(stats["loss"]) / total_weight if total_weight > 0 else None,
            test_loss=test_loss,
            test_accuracy=test_acc,
            bytes_down=bytes_down,
            bytes_up=self.uplink.payload_bytes() * completed,
            bytes_formula=8 * self.num_params * len(cohort.clients),
            round_seconds=time.perf_counter() - t0,
            train_seconds=train_seconds,
            samples=int(stats["samples"]),
            rss_mb=mem["rss_mb"],
            threads=mem["threads"],
            vram_allocated_mb=mem["vram_allocated_mb"],
            vram_reserved_mb=mem["vram_reserved_mb"],
            vram_peak_mb=mem["vram_peak_mb"],
            device=self.device_name,
        )
        return result

    def run(self, rounds: int | None = None) -> list[RoundResult]:
        """Run up to ``rounds`` more rounds (default: to the end); stop early when a callback says so."""
        results = []
        target = self.spec.rounds if rounds is None else min(self.spec.rounds, self.round + rounds)
        while self.round < target:
            result = self.run_round()
            results.append(result)
            if any(cb(result) for cb in self.callbacks):
                break
        return results

    def _broadcast(self) -> int:
        """Send the global model down; return the payload bytes per client.

        fp32/fp16/int8 send the (quantised) weights; top-k sends the change since the last
        broadcast, so ``received`` tracks what clients hold and carries the compression error.
        """
        codec = self.downlink
        if codec.name == "fp32":
            self.received.copy_(self.global_flat)
        elif codec.name == "topk":
            payload = codec.encode((self.global_flat - self.received).unsqueeze(0))
            self.received.add_(codec.decode(payload)[0])
        else:
            self.received.copy_(codec.decode(codec.encode(self.global_flat.unsqueeze(0)))[0])
        return codec.payload_bytes()

    def _train_cohort(self, cohort: Cohort) -> dict[str, torch.Tensor]:
        """Plan every group (drawing from the RNG here, in the parent), then train them.

        With ``compute.isolation == "process"`` the training runs in a fresh child process that
        exits after the round, taking any memory leaked by the model code with it.
        """
        G = self.spec.compute.client_group_size
        plans = []
        for first in range(0, len(cohort.trained), G):
            ids, steps = cohort.trained[first : first + G], cohort.steps[first : first + G]
            plans.append(
                plan_group(
                    self.rng,
                    ids,
                    steps,
                    self.offsets,
                    epochs=self.spec.local.epochs,
                    batch_size=self.spec.local.batch_size,
                    slots=bucket(len(ids), G),
                )
            )
        if self.spec.compute.isolation == "process":
            from workers.engine.isolation import train_in_child

            return train_in_child(self, plans)
        return train_plans(self.replicas, plans, self.received, self.uplink, self.residuals, self.acc)

    def evaluate(self) -> tuple[float, float]:
        """Test loss and accuracy of the global model, in large batches; one host sync."""
        return self._evaluate_on(self.test_x, self.test_y)

    def evaluate_train(self) -> tuple[float, float]:
        """Loss and accuracy of the global model on every client's training data.

        This is the global objective of the FedProx paper's plots (not the clients' local
        losses that ``RoundResult.train_loss`` reports); it reads all the data, so it is not
        part of a round.
        """
        data = self.replicas[0].data
        return self._evaluate_on(data.x_train, data.y_train)

    @torch.no_grad()
    def _evaluate_on(self, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
        n = len(y)
        if n == 0:
            return math.nan, math.nan
        loss = torch.zeros((), device=self.device)
        correct = torch.zeros((), device=self.device)
        bs = self.spec.evaluation.batch_size
        for i in range(0, n, bs):
            xb = as_input(x[i : i + bs].to(self.device, non_blocking=True))
            yb = y[i : i + bs].to(self.device, non_blocking=True)
            out = self.model(xb)
            loss += task_loss(out, yb).sum()
            hits = (out.argmax(dim=-1) == yb).float()
            correct += hits.mean(dim=-1).sum() if yb.dim() > 1 else hits.sum()
        return float(loss) / n, float(correct) / n

    def cache_info(self) -> dict[str, int]:
        """Sizes of every cache the engine keeps (bounded by the group size, not the cohort sizes)."""
        info: dict[str, int] = {}
        for i, r in enumerate(self.replicas):
            for key, value in r.trainer.cache_info().items():
                info[f"{r.device}#{i}.{key}"] = value
        return info

    def close(self) -> None:
        """Drop references to the data, model and buffers so their memory can be reused."""
        self.replicas = []
        self.model = None
        self.acc = self.received = self.residuals = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> tuple[dict[str, torch.Tensor], dict]:
        """Tensors and JSON metadata that let a new process continue exactly where this one is."""
        tensors = {"global": self.global_flat, "received": self.received}
        if self.residuals is not None:
            tensors["residuals"] = self.residuals
        for key, value in self.strategy.state_dict().items():
            tensors[f"strategy.{key}"] = value
        meta = {
            "format": CHECKPOINT_FORMAT,
            "spec": self.spec.to_dict(),
            "round": self.round,
            "rng": self.rng.bit_generator.state,
            "loss_scales": [r.trainer.scaler.scale for r in self.replicas],
        }
        return tensors, meta

    def load_state_dict(self, tensors: dict[str, torch.Tensor], meta: dict) -> None:
        if meta.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"unsupported checkpoint format {meta.get('format')!r}")
        self.global_flat.copy_(tensors["global"])
        self.received.copy_(tensors["received"])
        if self.residuals is not None:
            self.residuals.copy_(tensors["residuals"])
        self.strategy.load_state_dict(
            {k.removeprefix("strategy."): v.to(self.device) for k, v in tensors.items() if k.startswith("strategy.")}
        )
        self.round = int(meta["round"])
        self.rng.bit_generator.state = meta["rng"]
        for replica, scale in zip(self.replicas, meta.get("loss_scales", []), strict=False):
            replica.trainer.scaler.scale = scale

    def save_checkpoint(self, path: str | Path) -> int:
        """Write one safetensors file (no pickle); returns its size in bytes."""
        from safetensors.torch import save_file

        tensors, meta = self.state_dict()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in tensors.items()},
            str(tmp),
            metadata={"fedweb": json.dumps(meta)},
        )
        tmp.replace(path)  # atomic: a crash never leaves a half-written checkpoint under the real name
        return path.stat().st_size

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str | None = None, **kwargs) -> Simulation:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            meta = json.loads(f.metadata()["fedweb"])
            tensors = {k: f.get_tensor(k) for k in f.keys()}
        sim = cls(Spec.from_stored(meta["spec"]), device=device, **kwargs)  # written before any newer bounds
        sim.load_state_dict(tensors, meta)
        return sim


def _synchronize(devices: Sequence[torch.device]) -> None:
    """Wait for queued GPU work so per-round timings are not shifted into the next round."""
    for d in devices:
        if d.type == "cuda":
            torch.cuda.synchronize(d)


def make_replica(
    spec: Spec, model: torch.nn.Module, device: torch.device, data: FederatedData, vectorised: bool
) -> _Replica:
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
    return _Replica(device=device, data=data, trainer=trainer)


def max_slots(spec: Spec) -> int:
    """The most client slots any round of ``spec`` can need: buffers are sized once, to this."""
    G = spec.compute.client_group_size
    largest = max(spec.participation.schedule or [spec.participation.clients_per_round])
    return bucket(min(largest, G), G)


def train_plans(
    replicas: Sequence[_Replica],
    plans: Sequence[GroupPlan],
    received: torch.Tensor,
    uplink: Codec,
    residuals: torch.Tensor | None,
    acc: torch.Tensor,
) -> dict[str, torch.Tensor]:
    """Train each planned group (round-robin over the replicas' devices), encode every client's
    update to real bytes, decode it as the server would and sum it, weighted, into ``acc``.

    Returns device scalars (loss, weight, samples): the caller syncs once per round.
    """
    device = acc.device
    acc.zero_()
    loss = torch.zeros((), device=device)
    weight = torch.zeros((), device=device)
    samples = torch.zeros((), device=device)
    for k, plan in enumerate(plans):
        replica = replicas[k % len(replicas)]
        start = received.to(replica.device, non_blocking=True)
        out = replica.trainer.train(start, plan, replica.data)
        decoded = _uplink(uplink, residuals, out, plan, replica)
        w = plan.weights.to(device)
        accumulate_(acc, decoded.to(device, non_blocking=True), w)
        client_loss = out.loss_sum.to(device) / out.steps.to(device).clamp(min=1)
        loss += (client_loss * w).sum()
        weight += w.sum()
        samples += out.samples.to(device)
    return {"loss": loss, "weight": weight, "samples": samples}


def _uplink(
    codec: Codec, residuals: torch.Tensor | None, out: GroupOutput, plan: GroupPlan, replica: _Replica
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
