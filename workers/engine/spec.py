"""The experiment spec's schema: frozen dataclasses with a default, a help text and bounds per field.

``Spec.from_dict(d)`` validates and fills defaults; ``spec.to_dict()`` gives back JSON that
``from_dict`` turns into an equal spec. The per-field checks (types, ranges, lengths) are done
by :mod:`workers.engine.validation` from each field's metadata; the rules that tie fields
together are here, beside the fields they name. Every error is a :class:`SpecError` whose
message starts with the dotted name of the field (``data.alpha must be > 0``), so forms and the
API can put it next to the right input.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from workers.engine.validation import SpecError, build, describe_fields

DATASETS = ("digits", "synthetic", "synthetic_images", "emnist_h5", "femnist_leaf", "cifar10", "tokens")
PARTITIONS = ("iid", "dirichlet", "shards", "natural")
MODELS = ("logistic", "mlp", "cnn", "vgg", "lm14m")
ALGORITHMS = ("fedavg", "fedavgm", "fedprox", "fedadam", "fedyogi", "fedadagrad")
# Each algorithm has exactly one server optimizer; the field is kept explicit for readability.
SERVER_OPTIMIZER_OF = {
    "fedavg": "sgd",
    "fedprox": "sgd",
    "fedavgm": "sgd",
    "fedadam": "adam",
    "fedyogi": "yogi",
    "fedadagrad": "adagrad",
}
# Datasets whose clients exist in the data itself (writers, generated devices).
NATURAL_DATASETS = ("emnist_h5", "femnist_leaf", "synthetic", "synthetic_images", "tokens")
CODECS = ("fp32", "fp16", "int8", "topk")
PRECISIONS = ("fp32", "bf16", "fp16")
TRAINING_MODES = ("auto", "vectorized", "sequential")


def _meta(help: str, *, choices=None, min=None, max=None, min_open=False, nullable=False, max_length=None):
    # The keys workers.engine.validation reads; spec_fields() hands them to the form as they are.
    return {
        "help": help,
        "choices": choices,
        "min": min,
        "max": max,
        "min_open": min_open,
        "nullable": nullable,
        "max_length": max_length,  # of a string or a list
    }


def _f(default, help: str, **kw):
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=_meta(help, **kw))
    return field(default=default, metadata=_meta(help, **kw))


@dataclass(frozen=True)
class DataSpec:
    dataset: str = _f("digits", "Dataset: bundled digits, generated benchmarks, or files you have.", choices=DATASETS)
    num_clients: int = _f(100, "Number of clients the data is split into.", min=1, max=1_000_000)
    partition: str = _f("dirichlet", "How samples are split between clients.", choices=PARTITIONS)
    alpha: float = _f(0.5, "Dirichlet concentration; smaller is more non-IID.", min=0, min_open=True, max=10_000)
    shards_per_client: int = _f(2, "Classes per client for the 'shards' partition.", min=1, max=1000)
    path: str | None = _f(
        None,
        "File or folder for emnist_h5, femnist_leaf and cifar10, relative to the server's datasets folder.",
        nullable=True,
        max_length=1024,
    )
    image_size: int = _f(28, "Side of the images for digits (8 = native, 28 = EMNIST-sized).", choices=(8, 28))
    num_classes: int = _f(10, "Classes of synthetic_images (10 digits or 62 FEMNIST).", choices=(10, 62))
    mean_samples: int = _f(100, "Mean samples per client for synthetic_images and tokens.", min=1, max=100_000)
    synthetic_alpha: float = _f(1.0, "Synthetic(α, β): model heterogeneity α.", min=0, max=100)
    synthetic_beta: float = _f(1.0, "Synthetic(α, β): data heterogeneity β.", min=0, max=100)
    seq_len: int = _f(64, "Tokens per sequence for the tokens dataset.", min=2, max=2048)
    test_fraction: float = _f(0.2, "Share of samples held out for the server's test set.", min=0, max=0.9)


@dataclass(frozen=True)
class ModelSpec:
    name: str = _f("cnn", "Model architecture.", choices=MODELS)
    hidden: int = _f(200, "Hidden units of the mlp.", min=1, max=65_536)
    blocks: int = _f(2, "VGG blocks: cnn-(6·blocks+2)-width.", min=1, max=8)
    width: int = _f(4, "VGG width multiplier.", min=1, max=64)


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str = _f("fedavg", "Federated algorithm (server strategy).", choices=ALGORITHMS)
    mu: float = _f(0.0, "FedProx proximal term μ (0 = none).", min=0, max=1000)
    server_optimizer: str = _f(
        "sgd", "Server optimizer; follows from the algorithm.", choices=("sgd", "adam", "yogi", "adagrad")
    )
    server_lr: float = _f(1.0, "Server learning rate applied to the averaged update.", min=0, min_open=True, max=100)
    server_momentum: float = _f(0.9, "Server momentum for FedAvgM.", min=0, max=0.999)
    beta1: float = _f(0.9, "First-moment decay of FedAdam/FedYogi.", min=0, max=0.999)
    beta2: float = _f(0.99, "Second-moment decay of FedAdam/FedYogi.", min=0, max=0.9999)
    tau: float = _f(1e-3, "Adaptivity ε of FedAdam/FedYogi/FedAdagrad.", min=0, min_open=True, max=1)


@dataclass(frozen=True)
class ParticipationSpec:
    clients_per_round: int = _f(10, "Clients sampled each round.", min=1, max=1_000_000)
    schedule: list[int] | None = _f(
        None, "One cohort size per round; overrides clients_per_round.", nullable=True, max_length=1_000_000
    )


@dataclass(frozen=True)
class LocalSpec:
    epochs: int = _f(1, "Local epochs E.", min=1, max=1000)
    batch_size: int = _f(20, "Local batch size B.", min=1, max=65536)
    lr: float = _f(0.05, "Client learning rate.", min=0, min_open=True, max=10)
    momentum: float = _f(0.0, "Client SGD momentum.", min=0, max=0.999)
    weight_decay: float = _f(0.0, "Client weight decay.", min=0, max=1)


@dataclass(frozen=True)
class HeterogeneitySpec:
    straggler_fraction: float = _f(0.0, "Share of each cohort that can only do part of the local work.", min=0, max=1)
    straggler_policy: str = _f(
        "drop",
        "drop: discard stragglers (FedAvg); partial: aggregate their partial work (FedProx).",
        choices=("drop", "partial"),
    )
    dropout: float = _f(0.0, "Share of each cohort that never reports.", min=0, max=1)


@dataclass(frozen=True)
class CommunicationSpec:
    uplink: str = _f("fp32", "Codec for client updates.", choices=CODECS)
    downlink: str = _f("fp32", "Codec for the model sent to clients.", choices=CODECS)
    topk_ratio: float = _f(0.01, "Share of entries kept by top-k.", min=0, max=1, min_open=True)
    error_feedback: bool = _f(True, "Carry top-k's dropped mass into the client's next update.")


@dataclass(frozen=True)
class ComputeSpec:
    device: str = _f("auto", "auto, cpu, cuda, cuda:N or cuda:all.", max_length=16)
    client_group_size: int = _f(64, "Clients trained together in one vectorised step.", min=1, max=4096)
    precision: str = _f("fp32", "Training precision.", choices=PRECISIONS)
    isolation: str = _f(
        "none", "process: train each round's clients in a fresh child process.", choices=("none", "process")
    )
    training: str = _f(
        "auto",
        "vectorized (torch.func), sequential, or auto (vectorised when the model allows).",
        choices=TRAINING_MODES,
    )
    compile: bool = _f(False, "Capture the vectorised step with torch.compile (cache bounded by group size).")
    shards: int = _f(
        1,
        "Split each round's cohort over this many worker tasks (any worker of the queue); "
        "auto (stored as 0): one per live worker slot of the queue.",
        min=0,
        max=64,
    )


@dataclass(frozen=True)
class EvaluationSpec:
    every: int = _f(1, "Evaluate the global model every N rounds (and always on the last).", min=1, max=1_000_000)
    batch_size: int = _f(1024, "Evaluation batch size.", min=1, max=65536)


SECTIONS = {
    "data": DataSpec,
    "model": ModelSpec,
    "algorithm": AlgorithmSpec,
    "participation": ParticipationSpec,
    "local": LocalSpec,
    "heterogeneity": HeterogeneitySpec,
    "communication": CommunicationSpec,
    "compute": ComputeSpec,
    "evaluation": EvaluationSpec,
}


@dataclass(frozen=True)
class Spec:
    seed: int = _f(0, "Seed of every random choice; same seed, same run.", min=0, max=2**31 - 1)
    rounds: int = _f(45, "Number of federated rounds.", min=1, max=1_000_000)
    data: DataSpec = field(default_factory=DataSpec)
    model: ModelSpec = field(default_factory=ModelSpec)
    algorithm: AlgorithmSpec = field(default_factory=AlgorithmSpec)
    participation: ParticipationSpec = field(default_factory=ParticipationSpec)
    local: LocalSpec = field(default_factory=LocalSpec)
    heterogeneity: HeterogeneitySpec = field(default_factory=HeterogeneitySpec)
    communication: CommunicationSpec = field(default_factory=CommunicationSpec)
    compute: ComputeSpec = field(default_factory=ComputeSpec)
    evaluation: EvaluationSpec = field(default_factory=EvaluationSpec)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, *, bounds: bool = True) -> Spec:
        """Validate ``d`` (a JSON object) into a spec; missing fields take their defaults.

        ``bounds=False`` skips the numeric ranges and lengths (types, choices and cross-field
        rules still apply): see :meth:`from_stored`.
        """
        d = {} if d is None else d
        if not isinstance(d, dict):
            raise SpecError("spec", "must be a JSON object")
        spec = build(cls, _shards_auto(d), bounds=bounds)
        spec._check_cross_fields(d)
        return spec

    @classmethod
    def from_stored(cls, d: dict[str, Any] | None) -> Spec:
        """A spec stored before today's bounds existed (an old experiment, a checkpoint): it must
        still load and display, so its numbers are not range-checked again. New specs use
        :meth:`from_dict`."""
        return cls.from_dict(d, bounds=False)

    @classmethod
    def from_json(cls, text: str) -> Spec:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError("spec", f"is not valid JSON: {e}") from None
        return cls.from_dict(d)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    def replace(self, **sections: dict[str, Any] | Any) -> Spec:
        """A copy with some fields changed: ``spec.replace(rounds=3, compute={"device": "cpu"})``."""
        d = self.to_dict()
        for key, value in sections.items():
            if isinstance(value, dict):
                d[key] = {**d.get(key, {}), **value}
                if key == "algorithm" and "server_optimizer" not in value:
                    d[key].pop("server_optimizer")  # derived from the (maybe new) algorithm name
            else:
                d[key] = value
        return Spec.from_dict(d)

    # -- derived values ------------------------------------------------------------------------

    def cohort_size(self, round_number: int) -> int:
        """Clients sampled in ``round_number`` (1-based)."""
        schedule = self.participation.schedule
        if schedule:
            return schedule[round_number - 1]
        return self.participation.clients_per_round

    def _check_cross_fields(self, raw: dict) -> None:
        n = self.data.num_clients
        p = self.participation
        if p.schedule is not None:
            if len(p.schedule) < self.rounds:
                raise SpecError(
                    "participation.schedule",
                    f"has {len(p.schedule)} entries but rounds is {self.rounds}; give one cohort size per round",
                )
            for i, c in enumerate(p.schedule):
                if c < 1 or c > n:
                    raise SpecError(
                        "participation.schedule",
                        f"entry {i + 1} is {c}; each must be between 1 and data.num_clients ({n})",
                    )
        elif p.clients_per_round > n:
            raise SpecError("participation.clients_per_round", f"must be <= data.num_clients ({n})")
        expected = SERVER_OPTIMIZER_OF[self.algorithm.name]
        given = raw.get("algorithm", {}).get("server_optimizer")
        if given is not None and given != expected:
            raise SpecError("algorithm.server_optimizer", f"must be '{expected}' for {self.algorithm.name}")
        if self.algorithm.server_optimizer != expected:
            object.__setattr__(self, "algorithm", dataclasses.replace(self.algorithm, server_optimizer=expected))
        if self.data.dataset in ("emnist_h5", "femnist_leaf", "cifar10") and not self.data.path:
            raise SpecError("data.path", f"is required for the {self.data.dataset} dataset")
        if self.data.partition == "natural" and self.data.dataset not in NATURAL_DATASETS:
            raise SpecError("data.partition", f"'natural' needs a dataset with writers, not {self.data.dataset}")
        if (self.model.name == "lm14m") != (self.data.dataset == "tokens"):
            raise SpecError("model.name", "lm14m goes with the tokens dataset (and tokens with lm14m)")
        _check_device(self.compute.device)
        if self.compute.shards != 1:
            # A shard trains on another machine: a child process per round, or per-client residuals
            # kept in one process's memory, would each need shipping between workers; not supported.
            if self.compute.isolation == "process":
                raise SpecError("compute.shards", "cannot be combined with compute.isolation 'process'; use 1")
            if self.communication.uplink == "topk" and self.communication.error_feedback:
                raise SpecError("compute.shards", "cannot be combined with top-k error feedback; use 1")


def _shards_auto(d: dict) -> dict:
    """``compute.shards: "auto"`` is stored as 0 (the field is an integer)."""
    compute = d.get("compute")
    if isinstance(compute, dict) and compute.get("shards") == "auto":
        return {**d, "compute": {**compute, "shards": 0}}
    return d


def _check_device(device: str) -> None:
    if device in ("auto", "cpu", "cuda", "cuda:all"):
        return
    if device.startswith("cuda:") and device[5:].isdigit():
        return
    raise SpecError("compute.device", f"must be auto, cpu, cuda, cuda:N or cuda:all, not {device!r}")


def spec_fields() -> dict[str, dict[str, Any]]:
    """Every spec field by dotted name (``data.alpha``): its help text, default, JSON type and
    constraints (choices, min/max, nullable, max_length), in form order."""
    return describe_fields(Spec)
