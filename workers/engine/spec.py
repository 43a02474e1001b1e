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

import workers.engine.registry as registry
import workers.engine.spec_legacy as spec_legacy
from workers.engine.algorithms import build_algorithm
from workers.engine.fields import applies
from workers.engine.fields import spec_field as _f
from workers.engine.spec_sections import (  # noqa: F401 - the spec's public names live here too
    CLIENT_EVALUATION,
    COMPONENT_PATHS,
    FEDERATED_EVALUATION,
    GAUSSIAN,
    MECHANISMS,
    PARTITIONS,
    PRECISIONS,
    SECTIONS,
    TRAINING_MODES,
    AlgorithmSpec,
    CommunicationSpec,
    ComputeSpec,
    DataSpec,
    DownlinkSpec,
    EvaluationSpec,
    HeterogeneitySpec,
    LocalSpec,
    ModelSpec,
    ParticipationSpec,
    PrivacySpec,
    UplinkSpec,
)
from workers.engine.validation import SpecError, build, describe_fields


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
        d = spec_legacy.upgrade(d, strict=bounds)  # a flat spec from before components
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
        expected = registry.get("strategy", self.algorithm.name).traits["server_optimizer"]
        given = raw.get("algorithm", {}).get("server_optimizer") if isinstance(raw.get("algorithm"), dict) else None
        if given is not None and given != expected:
            raise SpecError("algorithm.server_optimizer", f"must be '{expected}' for {self.algorithm.name}")
        if self.algorithm.server_optimizer != expected:
            object.__setattr__(self, "algorithm", dataclasses.replace(self.algorithm, server_optimizer=expected))
        self._check_components()
        _check_device(self.compute.device)
        self._check_evaluation()
        self._check_shards()
        self._check_update_strategies()
        self._check_client_algorithm()

    def _check_components(self) -> None:
        """The rules that follow from the chosen components' traits."""
        dataset = registry.get("dataset", self.data.name)
        for f in dataclasses.fields(dataset.options):
            # A path option without a default names the dataset's files: nothing to load without it.
            if f.metadata.get("path") and f.default is None and not getattr(self.data.options, f.name):
                raise SpecError(f"data.options.{f.name}", f"is required for the {self.data.name} dataset")
        if self.data.partition == "natural" and not dataset.traits["natural"]:
            raise SpecError("data.partition", f"'natural' needs a dataset with writers, not {self.data.name}")
        task = registry.get("model", self.model.name).traits["task"]
        if task != dataset.traits["task"]:
            raise SpecError(
                "model.name",
                f"{self.model.name} is a {task} model and {self.data.name} a {dataset.traits['task']} dataset; "
                "pick a model and a dataset of the same task",
            )

    def _check_evaluation(self) -> None:
        ev = self.evaluation
        if ev.clients != "none" and self.data.client_test_fraction <= 0:
            raise SpecError(
                "data.client_test_fraction",
                f"must be > 0 for evaluation.clients '{ev.clients}' (clients need test data)",
            )
        if ev.clients == "cohort" and ev.cohort_size > self.data.num_clients:
            raise SpecError("evaluation.cohort_size", f"must be <= data.num_clients ({self.data.num_clients})")
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

    def _check_shards(self) -> None:
        if self.compute.shards != 1:
            # A shard trains on another machine: a child process per round, or per-client residuals
            # kept in one process's memory, would each need shipping between workers; not supported.
            if self.compute.isolation == "process":
                raise SpecError("compute.shards", "cannot be combined with compute.isolation 'process'; use 1")
            if self.communication.uplink.name == "topk" and self.communication.error_feedback:
                raise SpecError("compute.shards", "cannot be combined with top-k error feedback; use 1")
            if self.privacy.mechanism != "none" or self.evaluation.clients != "none":
                raise SpecError("compute.shards", "cannot be combined with DP or per-client evaluation yet; use 1")

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
        if self.compute.shards != 1:
            raise SpecError("algorithm.name", f"{name} needs every client's update in one place: use compute.shards 1")

    def _check_client_algorithm(self) -> None:
        # A client algorithm whose clients keep state or send more than their update needs the
        # round in one process with every row it touches: the isolation child and the shards
        # get the model and the plans only, and DP protects the update alone.
        client = self.algorithm.client
        algorithm = build_algorithm(client.name, client.options, num_params=1, device="cpu", lr=self.local.lr)
        if algorithm.trivial:
            return
        field, name = "algorithm.client.name", client.name
        if self.privacy.mechanism == "gaussian":
            raise SpecError(
                field, f"{name} sends values beside the update that DP does not protect: use fedavg or fedprox"
            )
        if self.compute.isolation == "process":
            raise SpecError(field, f"{name} keeps per-client state; it cannot run with compute.isolation 'process'")
        if self.compute.shards != 1:
            raise SpecError(field, f"{name} keeps per-client state in one place: use compute.shards 1")
        if algorithm.changes_update and registry.get("strategy", self.algorithm.name).traits["needs_updates"]:
            raise SpecError(
                field,
                f"{name} changes the averaged update, which {self.algorithm.name} never forms: pick another strategy",
            )


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
    constraints (choices, min/max, nullable, max_length), its ``applies_when`` rule and whether it
    is ``advanced``, in form order. A component section gives its ``name`` (choices from the
    registry) and one entry per registered component and option, ``model.options.vgg.width``,
    that applies when that component is selected."""
    return describe_fields(Spec)


def option_key(field: str, spec: dict[str, Any] | Spec) -> str:
    """The :func:`spec_fields` key of a spec field as errors name it: ``model.options.width`` ->
    ``model.options.vgg.width`` when ``spec`` (a dict in today's shape, or a Spec) selects vgg;
    any other field is returned as it is."""
    d = spec.to_dict() if isinstance(spec, Spec) else spec
    for path in COMPONENT_PATHS:
        prefix = f"{path}.options."
        if field.startswith(prefix):
            name = _dig(d, f"{path}.name")
            if isinstance(name, str):
                return f"{prefix}{name}.{field[len(prefix) :]}"
    return field


def _dig(d: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def flat_choices(spec: Spec) -> dict[str, Any]:
    """Every non-option field of ``spec`` by dotted name (``communication.uplink.name``)."""
    out: dict[str, Any] = {}

    def walk(value: dict, prefix: str) -> None:
        for key, v in value.items():
            if isinstance(v, dict) and key != "options":
                walk(v, f"{prefix}{key}.")
            elif key != "options":
                out[f"{prefix}{key}"] = v

    walk(spec.to_dict(), "")
    return out


def applicable_fields(spec: Spec) -> dict[str, bool]:
    """Every field by dotted name: whether it has any effect under ``spec``'s choices (by its
    ``applies_when`` rule). The form hides the others from view; validation ignores this."""
    flat = flat_choices(spec)
    return {name: applies(meta["applies_when"], flat) for name, meta in spec_fields().items()}
