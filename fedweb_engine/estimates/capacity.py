"""What a spec will cost before it runs, and the server's limits on that cost.

``estimate(spec, device_kind)`` works from the spec alone: the model is built on the ``meta``
device (no memory, no random numbers) and one forward pass over a meta sample counts the bytes
of every tensor an operation produces; no data is loaded and no weight is allocated.

Counted, in bytes, per round on the training device:

- model state: the global model, the copy clients receive, the aggregate, the replica's template
  (and the sequential trainer's flat weights and gradient), the server optimizer's moments, and
  the top-k error-feedback residuals (one row per client) when they are on;
- collected updates: for a strategy that needs every client's update (``needs_updates``), the
  ``[largest cohort, P]`` buffer of the round's decoded updates and its aggregation scratch;
- client buffers: the ``[slots, P]`` weights, gradients, momentum and decoded updates of one
  client group, and the uplink payloads;
- activations: every forward output for one sample × batch size × clients trained at once,
  × 2 for what the backward pass allocates beside them;
- evaluation: the largest forward output × 3 × evaluation batch (inputs, outputs, loss), which
  is not live at the same time as training.

Not counted: the CUDA context and allocator slack, torch.compile's graphs, fp16/bf16 autocast
savings (activations are counted in fp32, so mixed precision is overestimated), the isolated
child's second copy of the model, and the loader's transient memory while it reads or generates
data. The dataset is estimated separately (:func:`~fedweb_engine.data.shapes.dataset_bytes`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass
from functools import lru_cache

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from fedweb_engine.components import registry
from fedweb_engine.data.shapes import dataset_bytes, input_shape_of
from fedweb_engine.estimates.server_limits import LIMIT_SETTINGS, Estimate, Limits  # noqa: F401 - re-exported
from fedweb_engine.models import construct
from fedweb_engine.spec.schema import ModelSpec, Spec, SpecError
from fedweb_engine.spec.validation import build
from fedweb_engine.strategies import needs_updates
from fedweb_engine.strategies.robust import BLOCK_SCRATCH_BYTES
from fedweb_engine.training.plan import bucket
from fedweb_engine.training.vectorise import can_vectorise, vectorises_well_on_cpu

BACKWARD_FACTOR = 2  # the backward pass allocates about as much again as the forward saved
EVAL_FACTOR = 3  # evaluation holds a layer's input, its output and the loss's copy at once


@dataclass(frozen=True)
class Profile:
    """A model's shape-only facts: parameter layout and per-sample forward memory."""

    layout: tuple[int, ...]
    forward_bytes: int  # every op output of a forward pass, for one sample
    largest_bytes: int  # the largest single op output, for one sample
    vmappable: bool
    vectorises_on_cpu: bool


class _Counter(TorchDispatchMode):
    """Sums the bytes of every new (non-view) tensor an operation returns."""

    def __init__(self):
        super().__init__()
        self.total = 0
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor):
                    n = t.numel() * t.element_size()
                    self.total += n
                    self.largest = max(self.largest, n)
        return out


# A model the meta device cannot run (a plugin's data-dependent ``if``, an op without a meta
# kernel) is measured on the CPU instead, with real weights, when they are at most this large.
CPU_PROFILE_MAX_BYTES = 256 * 2**20


@lru_cache(maxsize=128)
def _profile(model_json: str, shape: tuple[int, ...], classes: int) -> Profile:
    spec = build(ModelSpec, json.loads(model_json), bounds=False)
    try:
        return _measure(spec, shape, classes, "meta")
    except Exception as e:  # plugin code: anything may fail on meta tensors
        meta_error = f"{type(e).__name__}: {e}"
    try:
        with torch.device("meta"):
            params = sum(p.numel() for p in construct(spec, shape, classes).parameters())
    except Exception as e:
        raise SpecError(
            "model.name", f"{spec.name} cannot be built for inputs {shape}: {type(e).__name__}: {e}"
        ) from None
    if params * 4 > CPU_PROFILE_MAX_BYTES:
        raise SpecError("model.name", f"{spec.name}'s memory cannot be estimated without running it: {meta_error}")
    try:
        return _measure(spec, shape, classes, "cpu")
    except Exception as e:
        raise SpecError("model.name", f"{spec.name} fails on inputs {shape}: {type(e).__name__}: {e}") from None


def _measure(spec: ModelSpec, shape: tuple[int, ...], classes: int, device: str) -> Profile:
    """Parameters and the bytes one sample's forward pass allocates, counted on ``device``."""
    with torch.device(device):
        model = construct(spec, shape, classes)
    dtype = torch.int64 if getattr(model, "takes_tokens", False) else torch.float32
    counter = _Counter()
    with counter, torch.no_grad():
        model(torch.zeros((1, *shape), dtype=dtype, device=device))
    return Profile(
        layout=tuple(p.numel() for p in model.parameters()),
        forward_bytes=counter.total,
        largest_bytes=counter.largest,
        vmappable=can_vectorise(model),
        vectorises_on_cpu=vectorises_well_on_cpu(model),
    )


def profile(spec: Spec) -> Profile:
    """The model's :class:`Profile` for the spec's data shape, cached by the model section."""
    shape, classes = input_shape_of(spec.data)
    return _profile(json.dumps(asdict(spec.model), sort_keys=True), shape, classes)


def model_layout(spec: Spec) -> tuple[int, ...]:
    """Parameters per tensor of the spec's model, in order (their sum is the parameter count)."""
    return profile(spec).layout


def _vectorised(spec: Spec, prof: Profile, device_kind: str) -> bool:
    # Mirrors Simulation._choose_training_mode.
    mode = spec.compute.training
    if mode != "auto":
        return mode == "vectorized"
    return prof.vmappable and (device_kind == "gpu" or prof.vectorises_on_cpu)


def estimate(spec: Spec, device_kind: str = "cpu") -> Estimate:
    """Parameters, round memory and dataset size of ``spec`` on a ``device_kind`` ("cpu"/"gpu") worker."""
    prof = profile(spec)
    params = sum(prof.layout)
    vector = 4 * params  # one fp32 copy of the weights
    group = spec.compute.client_group_size
    largest_cohort = max(spec.participation.schedule or [spec.participation.clients_per_round])
    slots = bucket(min(largest_cohort, group), group)
    vectorised = _vectorised(spec, prof, device_kind)
    momentum = 1 if spec.local.momentum else 0
    # Error feedback keeps one residual row per client (see Simulation._residual_store).
    comm = spec.communication
    residuals = spec.data.num_clients * vector if comm.uplink.name == "topk" and comm.error_feedback else 0
    moments = registry.get("strategy", spec.algorithm.name).traits["moments"]
    state = vector * (5 + moments) + residuals + collected_bytes(spec, params)
    # Vectorised: W, the per-tensor gradients and their concatenation, (momentum), decoded.
    # One by one: the trainer's output rows and the decoded updates.
    per_slot = (4 + momentum) if vectorised else 2
    buffers = slots * (per_slot * vector + vector)  # + the uplink payload, at most fp32-sized
    at_once = slots if vectorised else 1
    activations = BACKWARD_FACTOR * prof.forward_bytes * spec.local.batch_size * at_once
    evaluation = EVAL_FACTOR * prof.largest_bytes * spec.evaluation.batch_size
    return Estimate(
        device_kind=device_kind,
        params=params,
        model_bytes=vector,
        slots=at_once,
        state_bytes=state,
        buffer_bytes=buffers,
        activation_bytes=activations,
        eval_bytes=evaluation,
        round_bytes=state + max(buffers + activations, evaluation),
        dataset_bytes=dataset_bytes(spec.data),
    )


def collected_bytes(spec: Spec, params: int) -> int:
    """The buffer of every decoded update of a round (Simulation.collected: rows and weights),
    plus the aggregate and the robust rules' column-block scratch; 0 for streaming strategies."""
    if not needs_updates(spec.algorithm.name):
        return 0
    rows = max(spec.participation.schedule or [spec.participation.clients_per_round])
    return rows * (4 * params + 4) + 4 * params + min(BLOCK_SCRATCH_BYTES, 12 * rows * params)


def check_capacity(spec: Spec, limits: Limits, device_kind: str) -> Estimate:
    """The spec's :class:`Estimate`, or :class:`SpecError` naming the field most responsible for
    the first limit it exceeds, with the estimate and the limit in the message."""
    if spec.rounds > limits.max_rounds:
        _refuse("rounds", f"is {spec.rounds:,}", limits, "max_rounds", f"{limits.max_rounds:,} rounds")
    if spec.data.num_clients > limits.max_clients:
        n = spec.data.num_clients
        _refuse("data.num_clients", f"is {n:,}", limits, "max_clients", f"{limits.max_clients:,} clients")
    est = estimate(spec, device_kind)
    if est.params > limits.max_params:
        field = size_field("model", spec.model)
        what = f"is too large: the model would have {est.params:,} parameters ({human_bytes(est.model_bytes)})"
        _refuse(field, what, limits, "max_params", f"{limits.max_params:,}")
    if est.dataset_bytes is not None and est.dataset_bytes > limits.max_dataset_bytes:
        per_client = size_field("data", spec.data, None)
        big_clients = per_client is None or getattr(spec.data.options, per_client.rsplit(".", 1)[-1]) <= 100
        field = "data.num_clients" if big_clients else per_client
        what = f"is too large: the dataset would take about {human_bytes(est.dataset_bytes)} of memory"
        _refuse(field, what, limits, "max_dataset_bytes", human_bytes(limits.max_dataset_bytes))
    key = f"max_round_memory_bytes_{device_kind}"
    if est.round_bytes > getattr(limits, key):
        where = "a GPU's" if device_kind == "gpu" else "host"
        what = f"is too large for one round: it would need about {human_bytes(est.round_bytes)} of {where} memory"
        _refuse(
            _memory_field(spec, est),
            f"{what} ({_breakdown(spec, est)})",
            limits,
            key,
            human_bytes(getattr(limits, key)),
        )
    return est


def size_field(path: str, section, default: str | None = "model.name") -> str | None:
    """The option marked ``size=True`` of the selected component (``model.options.width``): the
    field a user would turn down when it is too big; ``default`` when it has none."""
    for f in dataclasses.fields(section.options):
        if f.metadata.get("size"):
            return f"{path}.options.{f.name}"
    return default


def _refuse(field: str, what: str, limits: Limits, limit: str, allowed: str) -> None:
    raise SpecError(field, f"{what}; this server allows at most {allowed} ({LIMIT_SETTINGS[limit]})")


def _memory_field(spec: Spec, est: Estimate) -> str:
    """The field whose part of the round memory is largest."""
    comm = spec.communication
    residual_bytes = (
        spec.data.num_clients * est.model_bytes if comm.uplink.name == "topk" and comm.error_feedback else 0
    )
    collected = collected_bytes(spec, est.params)
    cohort_field = "participation.schedule" if spec.participation.schedule else "participation.clients_per_round"
    parts = {
        "communication.error_feedback": residual_bytes,
        cohort_field: collected,
        size_field("model", spec.model): est.state_bytes - residual_bytes - collected,
        "compute.client_group_size": est.buffer_bytes + (est.activation_bytes if est.slots > 1 else 0),
        "local.batch_size": est.activation_bytes if est.slots == 1 else 0,
        "evaluation.batch_size": est.eval_bytes,
    }
    return max(parts, key=parts.get)


def _breakdown(spec: Spec, est: Estimate) -> str:
    clients = f"{est.slots} client{'s' if est.slots > 1 else ''} × batch {spec.local.batch_size}"
    return (
        f"activations {human_bytes(est.activation_bytes)} for {clients}, "
        f"client buffers {human_bytes(est.buffer_bytes)}, model state {human_bytes(est.state_bytes)}, "
        f"evaluation {human_bytes(est.eval_bytes)}"
    )


def human_bytes(n: float) -> str:
    """``3.1 GB``, ``740 MB``: decimal units, like the dashboard's."""
    for unit, size in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 100 * size else f"{n / size:,.0f} {unit}"
    return f"{int(n)} B"
