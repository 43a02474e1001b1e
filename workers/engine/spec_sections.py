"""The sections of an experiment spec: one frozen dataclass each, a default and metadata per field.

``workers.engine.spec.Spec`` puts them together and checks the rules that tie fields of different
sections; ``workers.engine.validation`` reads the metadata (types, ranges, choices, lengths) and
``workers.engine.fields`` the "applies when" rules the form uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import workers.engine.registry as registry
from workers.engine.fields import meta
from workers.engine.fields import spec_field as _f

PARTITIONS = ("iid", "dirichlet", "shards", "natural")
PRECISIONS = ("fp32", "bf16", "fp16")
TRAINING_MODES = ("auto", "vectorized", "sequential")
# "Applies when" rules shared by several fields (the shape: workers.engine.fields).
FEDERATED_EVALUATION = ("none", "sampled", "cohort")
MECHANISMS = ("none", "gaussian")
CLIENT_EVALUATION = {"evaluation.clients": ["sampled", "cohort"]}
GAUSSIAN = {"privacy.mechanism": ["gaussian"]}
# The sections that select a registered component: dotted path -> registry kind.
COMPONENT_PATHS = {
    "model": "model",
    "data": "dataset",
    "algorithm": "strategy",
    "algorithm.client": "algorithm",
    "communication.uplink": "codec",
    "communication.downlink": "codec",
}


def _options(kind: str):
    """The ``options`` field of a component section: validated against the selected component's
    options dataclass (``validation.build``); None fills in that component's defaults."""
    return field(default=None, metadata={**meta("Options of the selected component."), "options_of": kind})


def _fill_options(section: Any, kind: str) -> None:
    # A section built in Python without options (ModelSpec(name="mlp")) gets the component's defaults.
    if section.options is None:
        object.__setattr__(section, "options", registry.get(kind, section.name).options())


@dataclass(frozen=True)
class DataSpec:
    name: str = _f("digits", "Dataset: bundled digits, generated benchmarks, or files you have.", kind="dataset")
    options: Any = _options("dataset")
    num_clients: int = _f(100, "Number of clients the data is split into.", min=1, max=1_000_000)
    partition: str = _f("dirichlet", "How samples are split between clients.", choices=PARTITIONS)
    alpha: float = _f(
        0.5,
        "Dirichlet concentration; smaller is more non-IID.",
        min=0,
        min_open=True,
        max=10_000,
        applies_when={"data.partition": ["dirichlet"]},
    )
    shards_per_client: int = _f(
        2,
        "Classes per client for the 'shards' partition.",
        min=1,
        max=1000,
        applies_when={"data.partition": ["shards"]},
    )
    test_fraction: float = _f(
        0.2, "Share of samples held out for the server's test set.", min=0, max=0.9, advanced=True
    )
    client_test_fraction: float = _f(
        0.0,
        "Share of each client's samples held out as its own test split (federated evaluation).",
        min=0,
        max=0.5,
        applies_when=CLIENT_EVALUATION,
    )

    def __post_init__(self):
        _fill_options(self, "dataset")

    @property
    def dataset(self) -> str:
        """The dataset's name (the field was ``data.dataset`` before components)."""
        return self.name


@dataclass(frozen=True)
class ModelSpec:
    name: str = _f("cnn", "Model architecture.", kind="model")
    options: Any = _options("model")

    def __post_init__(self):
        _fill_options(self, "model")


@dataclass(frozen=True)
class ClientAlgorithmSpec:
    name: str = _f(
        "fedavg",
        "Client algorithm: what clients do in local training (FedProx, SCAFFOLD, FedDyn, Ditto …).",
        kind="algorithm",
    )
    options: Any = _options("algorithm")

    def __post_init__(self):
        _fill_options(self, "algorithm")


@dataclass(frozen=True)
class AlgorithmSpec:
    name: str = _f("fedavg", "Federated algorithm (server strategy).", kind="strategy")
    options: Any = _options("strategy")
    server_optimizer: str = _f("sgd", "Server optimizer; follows from the algorithm.", max_length=64)
    server_lr: float = _f(1.0, "Server learning rate applied to the averaged update.", min=0, min_open=True, max=100)
    # The client's side of the round, composable with any server strategy (SCAFFOLD + FedAdam).
    client: ClientAlgorithmSpec = field(default_factory=ClientAlgorithmSpec)

    def __post_init__(self):
        _fill_options(self, "strategy")

    @property
    def mu(self) -> float:
        """FedProx's μ (0 unless the client algorithm is fedprox): the field ``algorithm.mu`` was."""
        return float(getattr(self.client.options, "mu", 0.0)) if self.client.name == "fedprox" else 0.0


@dataclass(frozen=True)
class UplinkSpec:
    name: str = _f("fp32", "Codec for client updates.", kind="codec")
    options: Any = _options("codec")

    def __post_init__(self):
        _fill_options(self, "codec")


@dataclass(frozen=True)
class DownlinkSpec(UplinkSpec):
    """The uplink's fields; only the name's help differs."""

    name: str = _f("fp32", "Codec for the model sent to clients.", kind="codec")


@dataclass(frozen=True)
class CommunicationSpec:
    uplink: UplinkSpec = field(default_factory=UplinkSpec)
    downlink: DownlinkSpec = field(default_factory=DownlinkSpec)
    # Residuals are kept per client for the uplink only: the downlink has no client-side memory.
    error_feedback: bool = _f(
        True,
        "Carry top-k's dropped mass into the client's next update.",
        applies_when={"communication.uplink.name": ["topk"]},
    )


@dataclass(frozen=True)
class ParticipationSpec:
    clients_per_round: int = _f(10, "Clients sampled each round.", min=1, max=1_000_000)
    schedule: list[int] | None = _f(
        None,
        "One cohort size per round; overrides clients_per_round.",
        nullable=True,
        max_length=1_000_000,
        advanced=True,
    )


@dataclass(frozen=True)
class LocalSpec:
    epochs: int = _f(1, "Local epochs E.", min=1, max=1000)
    batch_size: int = _f(20, "Local batch size B.", min=1, max=65536)
    lr: float = _f(0.05, "Client learning rate.", min=0, min_open=True, max=10)
    momentum: float = _f(0.0, "Client SGD momentum.", min=0, max=0.999, advanced=True)
    weight_decay: float = _f(0.0, "Client weight decay.", min=0, max=1, advanced=True)


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
class ComputeSpec:
    device: str = _f("auto", "auto, cpu, cuda, cuda:N or cuda:all.", max_length=16)
    client_group_size: int = _f(64, "Clients trained together in one vectorised step.", min=1, max=4096, advanced=True)
    precision: str = _f("fp32", "Training precision.", choices=PRECISIONS, advanced=True)
    isolation: str = _f(
        "none",
        "process: train each round's clients in a fresh child process.",
        choices=("none", "process"),
        advanced=True,
    )
    training: str = _f(
        "auto",
        "vectorized (torch.func), sequential, or auto (vectorised when the model allows).",
        choices=TRAINING_MODES,
        advanced=True,
    )
    compile: bool = _f(
        False,
        "Capture the vectorised step with torch.compile (cache bounded by group size).",
        advanced=True,
        applies_when={"compute.training": ["auto", "vectorized"]},
    )
    shards: int = _f(
        1,
        "Split each round's cohort over this many worker tasks (any worker of the queue); "
        "auto (stored as 0): one per live worker slot of the queue.",
        min=0,
        max=64,
        advanced=True,
    )


@dataclass(frozen=True)
class EvaluationSpec:
    every: int = _f(1, "Evaluate the global model every N rounds (and always on the last).", min=1, max=1_000_000)
    batch_size: int = _f(1024, "Evaluation batch size.", min=1, max=65536, advanced=True)
    clients: str = _f(
        "none",
        "Federated evaluation on clients' own test splits: none, the round's sampled clients, or a fixed cohort.",
        choices=FEDERATED_EVALUATION,
    )
    cohort_size: int = _f(
        20,
        "Clients in the fixed evaluation cohort.",
        min=1,
        max=1_000_000,
        applies_when={"evaluation.clients": ["cohort"]},
    )


@dataclass(frozen=True)
class PrivacySpec:
    mechanism: str = _f(
        "none", "gaussian: DP-FedAvg (clip each client's update, add Gaussian noise at the server).", choices=MECHANISMS
    )
    clip_norm: float = _f(
        1.0,
        "Clipping norm C of each client's update (the start value when adaptive).",
        min=0,
        min_open=True,
        max=1e6,
        applies_when=GAUSSIAN,
    )
    noise_multiplier: float = _f(
        1.0, "Noise multiplier z: the noise's standard deviation is z·C.", min=0, max=1000, applies_when=GAUSSIAN
    )
    delta: float = _f(1e-5, "δ at which ε is reported.", min=0, min_open=True, max=0.1, applies_when=GAUSSIAN)
    adaptive_clip: bool = _f(
        False, "Adapt C towards a quantile of the update norms (Andrew et al. 2021).", applies_when=GAUSSIAN
    )
    target_quantile: float = _f(
        0.5,
        "Share of updates the adaptive C aims to leave unclipped.",
        min=0,
        max=1,
        applies_when=GAUSSIAN,
        advanced=True,
    )
    clip_lr: float = _f(
        0.2, "Learning rate of the adaptive C (geometric update).", min=0, max=10, applies_when=GAUSSIAN, advanced=True
    )
    count_noise: float = _f(
        0.0,
        "Std of the noise on the unclipped count (adaptive C); 0 = the paper's cohort/20.",
        min=0,
        max=1e6,
        applies_when=GAUSSIAN,
        advanced=True,
    )


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
    "privacy": PrivacySpec,
}
