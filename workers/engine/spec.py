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

from workers.engine.fields import applies
from workers.engine.fields import spec_field as _f
from workers.engine.spec_sections import (  # noqa: F401 - the spec's public names live here too
    ADAPTIVE,
    ALGORITHMS,
    CLIENT_EVALUATION,
    CODECS,
    DATASETS,
    FEDERATED_EVALUATION,
    FILE_DATASETS,
    GAUSSIAN,
    MECHANISMS,
    MODELS,
    NATURAL_DATASETS,
    PARTITIONS,
    PRECISIONS,
    SECTIONS,
    SERVER_OPTIMIZER_OF,
    TOPK_ANY_LINK,
    TRAINING_MODES,
    AlgorithmSpec,
    CommunicationSpec,
    ComputeSpec,
    DataSpec,
    EvaluationSpec,
    HeterogeneitySpec,
    LocalSpec,
    ModelSpec,
    ParticipationSpec,
    PrivacySpec,
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
        if self.data.dataset in FILE_DATASETS and not self.data.path:
            raise SpecError("data.path", f"is required for the {self.data.dataset} dataset")
        if self.data.partition == "natural" and self.data.dataset not in NATURAL_DATASETS:
            raise SpecError("data.partition", f"'natural' needs a dataset with writers, not {self.data.dataset}")
        if (self.model.name == "lm14m") != (self.data.dataset == "tokens"):
            raise SpecError("model.name", "lm14m goes with the tokens dataset (and tokens with lm14m)")
        _check_device(self.compute.device)
        self._check_evaluation()
        self._check_shards()

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
            if self.communication.uplink == "topk" and self.communication.error_feedback:
                raise SpecError("compute.shards", "cannot be combined with top-k error feedback; use 1")
            if self.privacy.mechanism != "none" or self.evaluation.clients != "none":
                raise SpecError("compute.shards", "cannot be combined with DP or per-client evaluation yet; use 1")


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
    is ``advanced``, in form order."""
    return describe_fields(Spec)


def applicable_fields(spec: Spec) -> dict[str, bool]:
    """Every field by dotted name: whether it has any effect under ``spec``'s choices (by its
    ``applies_when`` rule). The form hides the others from view; validation ignores this."""
    flat = {}
    for key, value in spec.to_dict().items():
        items = value.items() if key in SECTIONS else [("", value)]
        flat.update({f"{key}.{name}" if name else key: v for name, v in items})
    return {name: applies(meta["applies_when"], flat) for name, meta in spec_fields().items()}
