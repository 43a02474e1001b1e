"""The experiment spec's schema: frozen dataclasses with a default, a help text and bounds per field.

Here: ``Spec``, its sections of plain settings (participation, local, heterogeneity, compute,
evaluation, privacy) and the rules that tie sections together; the sections that select a
registered component (data, model, algorithm, communication) are in
:mod:`fedweb_engine.spec.components`. ``Spec.from_dict(d)`` validates and fills defaults; ``spec.to_dict()`` gives back JSON that
``from_dict`` turns into an equal spec. The per-field checks (types, ranges, lengths) are done
by :mod:`fedweb_engine.spec.validation` from each field's metadata; the rules that tie fields
together are here, beside the fields they name. Every error is a :class:`SpecError` whose
message starts with the dotted name of the field (``data.alpha must be > 0``), so forms and the
API can put it next to the right input.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import fedweb_engine.components.registry as registry
import fedweb_engine.spec.legacy as spec_legacy
from fedweb_engine.spec.components import (  # noqa: F401 - the spec's public names live here too
    CLIENT_EVALUATION,
    COMPONENT_PATHS,
    COMPONENT_SECTIONS,
    PARTITIONS,
    AlgorithmSpec,
    CommunicationSpec,
    DataSpec,
    DownlinkSpec,
    ModelSpec,
    UplinkSpec,
    applied_defaults,
    check_components,
    explain_component_error,
    option_key,
)
from fedweb_engine.spec.fields import spec_field as _f
from fedweb_engine.spec.validation import Collect, SpecError, build, describe_fields, each_error, raise_all, section_of

PRECISIONS = ("fp32", "bf16", "fp16")
TRAINING_MODES = ("auto", "vectorized", "sequential")
COMPILE_MODES = ("auto", "on", "off")
FEDERATED_EVALUATION = ("none", "sampled", "cohort")
MECHANISMS = ("none", "gaussian")
GAUSSIAN = {"privacy.mechanism": ["gaussian"]}  # an "applies when" rule (the shape: fedweb_engine.spec.fields)


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
    compile: str = _f(
        "auto",
        "Compile the vectorised step with torch.compile: auto (when the run's steps repay the compilation, "
        "decided and logged once the first steps are measured), on or off.",
        choices=COMPILE_MODES,
        advanced=True,
        applies_when={"compute.training": ["auto", "vectorized"]},
    )
    ranks: int = _f(
        1,
        "Split each round's cohort over this many torch.distributed ranks (GPUs or CPU processes of one "
        "worker, or several workers); the results do not depend on it. auto (stored as 0): as many as are free.",
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
    privacy: PrivacySpec = field(default_factory=PrivacySpec)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, *, bounds: bool = True) -> Spec:
        """Validate ``d`` (a JSON object) into a spec; missing fields take their defaults.

        ``bounds=False`` skips the numeric ranges and lengths (types, choices and cross-field
        rules still apply) and drops old flat option keys the chosen component lacks instead of
        refusing them: see :meth:`from_stored`.
        """
        d = {} if d is None else d
        if not isinstance(d, dict):
            raise SpecError("spec", "must be a JSON object")
        # A flat spec from before components: the upgrade sees (and copies) only those sections.
        d = {**d, **spec_legacy.upgrade({k: v for k, v in d.items() if k in COMPONENT_SECTIONS}, strict=bounds)}
        if "compute" in d:  # only that section: the others are not the legacy reader's to see
            d = {**d, "compute": spec_legacy.compute_ranks(d["compute"])}
        d = {**d, **{k: {**d.get(k, {}), **v} for k, v in applied_defaults(d, SECTIONS).items()}}
        try:
            spec = build(cls, d, bounds=bounds)
        except SpecError as e:
            raise_all([explain_component_error(one, d) for one in each_error(e)])
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
                if ("name" in value or "dataset" in value) and "options" not in value:
                    d[key].pop("options", None)  # another component: its own options' defaults
                if "dataset" in value:
                    d[key].pop("name", None)  # an old-style data.dataset names the dataset
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
        # Independent rules, each judged: a spec breaking two learns of both at once.
        collect = Collect()
        checks = (self._check_participation, lambda: self._check_server_optimizer(raw), lambda: check_components(self),
                  lambda: _check_device(self.compute.device), self._check_evaluation, self._check_ranks,
                  self._check_update_strategies, self._check_client_algorithm)  # fmt: skip
        for check in checks:
            with collect:
                check()
        collect.done()

    def _check_participation(self) -> None:
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

    def _check_server_optimizer(self, raw: dict) -> None:
        expected = registry.get("strategy", self.algorithm.name).traits["server_optimizer"]
        given = raw.get("algorithm", {}).get("server_optimizer") if isinstance(raw.get("algorithm"), dict) else None
        if given is not None and given != expected:
            raise SpecError("algorithm.server_optimizer", f"must be '{expected}' for {self.algorithm.name}")
        if self.algorithm.server_optimizer != expected:
            object.__setattr__(self, "algorithm", dataclasses.replace(self.algorithm, server_optimizer=expected))

    def _check_evaluation(self) -> None:
        ev = self.evaluation
        if ev.clients != "none" and self.data.client_test_fraction <= 0:
            raise SpecError(
                "data.client_test_fraction",
                f"must be > 0 for evaluation.clients '{ev.clients}' (clients need test data)",
                related=("evaluation.clients",),
            )
        if ev.clients == "cohort" and ev.cohort_size > self.data.num_clients:
            raise SpecError(
                "evaluation.cohort_size",
                f"must be <= data.num_clients ({self.data.num_clients})",
                related=("evaluation.clients",),
            )
        p = self.privacy
        if p.mechanism == "gaussian" and p.adaptive_clip and p.noise_multiplier > 0:
            # Andrew et al.: the update's noise is what the count's noise leaves of z, so 2σ_b must exceed z.
            cohort = min(self.participation.schedule or [self.participation.clients_per_round])
            sigma_b = p.count_noise or cohort / 20
            if 2 * sigma_b <= p.noise_multiplier:
                raise SpecError(
                    "privacy.count_noise",
                    f"must be > noise_multiplier / 2 ({p.noise_multiplier / 2:g}) with adaptive clipping "
                    f"(0 means cohort/20 = {cohort / 20:g})",
                )

    def _check_ranks(self) -> None:
        if self.compute.ranks != 1 and self.compute.isolation == "process":
            # A rank's training would need its own child per round, with the rows it borrows shipped
            # twice more; ranks already keep leaky user code out of the worker's process.
            raise SpecError("compute.isolation", "cannot be 'process' with compute.ranks other than 1; use none")

    def _check_update_strategies(self) -> None:
        # A strategy that needs every client's update (registry trait) cannot run where only their
        # sum exists: DP clips and noises the sum, and a shard would have to ship every row.
        name = self.algorithm.name
        if not registry.get("strategy", name).traits["needs_updates"]:
            return
        if self.privacy.mechanism == "gaussian":
            raise SpecError(
                "algorithm.name", f"{name} needs every client's update; DP noises their sum: use privacy.mechanism none"
            )
        if self.compute.ranks != 1:
            raise SpecError("algorithm.name", f"{name} needs every client's update in one process: use compute.ranks 1")

    def _check_client_algorithm(self) -> None:
        # A client algorithm whose clients keep state or send more than their update needs the
        # round in one process with every row it touches: the isolation child gets the model and
        # the plans only, and DP protects the update alone. (Ranks borrow their clients' rows.)
        client = self.algorithm.client
        trivial, changes_update = _client_algorithm_traits(client, self.local.lr)
        if trivial:
            return
        field, name = "algorithm.client.name", client.name
        if self.privacy.mechanism == "gaussian":
            raise SpecError(
                field, f"{name} sends values beside the update that DP does not protect: use fedavg or fedprox"
            )
        if self.compute.isolation == "process":
            raise SpecError(field, f"{name} keeps per-client state; it cannot run with compute.isolation 'process'")
        if changes_update and registry.get("strategy", self.algorithm.name).traits["needs_updates"]:
            raise SpecError(
                field,
                f"{name} changes the averaged update, which {self.algorithm.name} never forms: pick another strategy",
            )


def _client_algorithm_traits(client: Any, lr: float) -> tuple[bool, bool]:
    """Whether the client algorithm is trivial (nothing but the update travels or persists) and
    whether it changes the averaged update: as registered, or else as its built object says."""
    traits = registry.get("algorithm", client.name).traits
    if traits.get("trivial") is not None and traits.get("changes_update") is not None:
        return traits["trivial"], traits["changes_update"]
    # why: building it needs torch, which a plugin that declared neither has imported anyway.
    from fedweb_engine.algorithms import build_algorithm

    algorithm = build_algorithm(client.name, client.options, num_params=1, device="cpu", lr=lr)
    return algorithm.trivial, algorithm.changes_update


def _check_device(device: str) -> None:
    if device in ("auto", "cpu", "cuda", "cuda:all"):
        return
    if device.startswith("cuda:") and device[5:].isdigit():
        return
    raise SpecError("compute.device", f"must be auto, cpu, cuda, cuda:N or cuda:all, not {device!r}")


def spec_fields() -> dict[str, dict[str, Any]]:
    """Every spec field by dotted name (``data.alpha``): its help text, default, JSON type and
    constraints (choices, min/max, nullable, max_length), its ``applies_when`` rule and whether it
    is ``advanced``, in form order. A component section gives its ``name`` (choices from the
    registry) and one entry per registered component and option, ``model.options.vgg.width``,
    that applies when that component is selected."""
    return describe_fields(Spec)


# Every section by name, in the spec's (and the form's) order.
SECTIONS = {f.name: section_of(f) for f in dataclasses.fields(Spec) if section_of(f) is not None}
