"""The spec's sections that select a registered component (data, model, algorithm, communication):
one frozen dataclass each, a ``name`` from the registry and that component's ``options``.

``fedweb_engine.spec.schema`` declares the other sections, puts them all together in ``Spec`` and checks
the rules that tie fields of different sections; ``fedweb_engine.spec.validation`` reads the metadata
(types, ranges, choices, lengths), ``fedweb_engine.spec.fields`` the "applies when" rules the form uses
and ``fedweb_engine.spec.legacy`` upgrades these sections' old flat shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import fedweb_engine.components.registry as registry
from fedweb_engine.spec.fields import applies, meta
from fedweb_engine.spec.fields import spec_field as _f
from fedweb_engine.spec.validation import SpecError

PARTITIONS = ("iid", "dirichlet", "shards", "natural")
# "Applies when" rule (the shape: fedweb_engine.spec.fields).
CLIENT_EVALUATION = {"evaluation.clients": ["sampled", "cohort"]}
# The sections that select a registered component: dotted path -> registry kind.
COMPONENT_PATHS = {
    "model": "model",
    "data": "dataset",
    "algorithm": "strategy",
    "algorithm.client": "algorithm",
    "communication.uplink": "codec",
    "communication.downlink": "codec",
}

# What each component choice is called where a person reads it: the form's label and the short
# name of legends and run names ("client=scaffold"). Two selects both labelled "Name" (the server's
# and the clients' algorithm; the uplink's and the downlink's codec) said nothing about which is which.
COMPONENT_LABELS = {
    "model": ("Model", "model"),
    "data": ("Dataset", "dataset"),
    "algorithm": ("Server strategy", "strategy"),
    "algorithm.client": ("Client algorithm", "client"),
    "communication.uplink": ("Uplink codec", "uplink"),
    "communication.downlink": ("Downlink codec", "downlink"),
}


def short_name(dotted: str) -> str:
    """A field as legends and run names call it: a component's name by what it selects
    (``algorithm.client.name`` -> ``client``), any other field by its last part (``mu``)."""
    path, _, last = dotted.rpartition(".")
    if last == "name" and path in COMPONENT_LABELS:
        return COMPONENT_LABELS[path][1]
    return last


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
        applied_default=0.2,
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


COMPONENT_SECTIONS = {
    "data": DataSpec,
    "model": ModelSpec,
    "algorithm": AlgorithmSpec,
    "communication": CommunicationSpec,
}


def applied_defaults(d: dict[str, Any], sections: dict[str, type]) -> dict[str, dict[str, Any]]:
    """``{section: {field: value}}`` for the fields that have an ``applied_default``, where the
    spec ``d`` leaves them out and their rule holds (``sections``: the spec's section classes by
    name, for the rule's choices' defaults): per-client evaluation needs a client test split, and 0
    (the default while it does not apply) would only be refused. The form does the same as the rule
    starts to hold."""
    filled: dict[str, dict[str, Any]] = {}
    for path, cls in sections.items():
        section = d.get(path, {})
        if not isinstance(section, dict):
            continue  # validation names it
        for f in dataclasses.fields(cls):
            value, rule = f.metadata.get("applied_default"), f.metadata.get("applies_when")
            if value is not None and f.name not in section and applies(rule, _choices(d, rule, sections)):
                filled.setdefault(path, {})[f.name] = value
    return filled


def _choices(d: dict, rule: list[dict], sections: dict[str, type]) -> dict[str, Any]:
    # The values of the choice fields a rule names, as the raw spec holds them (their defaults otherwise).
    values = {}
    for name in {n for alt in rule for n in alt}:
        section, _, field_name = name.partition(".")
        default = next(f.default for f in dataclasses.fields(sections[section]) if f.name == field_name)
        raw = d.get(section)
        values[name] = raw.get(field_name, default) if isinstance(raw, dict) else default
    return values


def check_components(spec: Any) -> None:
    """The rules of a ``Spec`` that follow from its chosen components' traits (``Spec.from_dict`` runs them)."""
    dataset = registry.get("dataset", spec.data.name)
    for f in dataclasses.fields(dataset.options):
        # A path option without a default names the dataset's files: nothing to load without it.
        if f.metadata.get("path") and f.default is None and not getattr(spec.data.options, f.name):
            raise SpecError(f"data.options.{f.name}", f"is required for the {spec.data.name} dataset")
    if spec.data.partition == "natural" and not dataset.traits["natural"]:
        raise SpecError("data.partition", f"'natural' needs a dataset with writers, not {spec.data.name}")
    task = registry.get("model", spec.model.name).traits["task"]
    if task != dataset.traits["task"]:
        raise SpecError(
            "model.name",
            f"{spec.model.name} is a {task} model and {spec.data.name} a {dataset.traits['task']} dataset; "
            "pick a model and a dataset of the same task",
        )


def option_key(field: str, spec: dict[str, Any]) -> str:
    """The ``spec_fields`` key of a spec field as errors name it: ``model.options.width`` ->
    ``model.options.vgg.width`` when ``spec`` (a dict in today's shape) selects vgg; any other
    field is returned as it is."""
    for path in COMPONENT_PATHS:
        prefix = f"{path}.options."
        if field.startswith(prefix):
            name = _dig(spec, f"{path}.name")
            if isinstance(name, str):
                return f"{prefix}{name}.{field[len(prefix) :]}"
    return field


def _dig(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def explain_component_error(error: SpecError, raw: dict) -> SpecError:
    """``error``, or a clearer one where a component of one kind was named where another kind goes:
    a client algorithm (scaffold) given as the server strategy is told where client algorithms go."""
    algorithm = raw.get("algorithm")
    name = algorithm.get("name") if isinstance(algorithm, dict) else None
    if error.field == "algorithm.name" and isinstance(name, str) and name in registry.names("algorithm"):
        strategies = ", ".join(registry.names("strategy"))
        return SpecError(
            "algorithm.name",
            f"{name[:40]!r} is a client algorithm, not a server strategy: set algorithm.client.name to "
            f"{name[:40]!r} (what clients do) and algorithm.name to a server strategy ({strategies})",
        )
    return error
