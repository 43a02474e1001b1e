"""RoundResult: the one record per round shared by the engine, database, API, WebSocket and charts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedweb_engine.results.round_fields import FIELDS, Field


def _to_dict(self) -> dict:
    """The record as JSON-able values, keyed in ``ROUND_RESULT_FIELDS`` order."""
    return dataclasses.asdict(self)


def _annotation(field: Field):
    return field.type | None if field.null else field.type


@classmethod
def _from_parts(cls, *parts: Mapping[str, Any] | Any) -> Any:
    """The record of a round from its parts (the part dataclasses below, or mappings of fields):
    each field given by exactly one part, every required field by some part."""
    fields: dict[str, Any] = {}
    for part in parts:
        values = dataclasses.asdict(part) if dataclasses.is_dataclass(part) else part
        twice = fields.keys() & values.keys()
        if twice:
            raise ValueError(f"round fields given by two parts: {', '.join(sorted(twice))}")
        fields.update(values)
    return cls(**fields)


# What one federated round did and cost (the CLI prints exactly these keys as JSON): a frozen
# dataclass made from the declarations of ``round_fields.FIELDS``, where each field is documented.
# The nullable fields after the last required one default to None, so a result built without a
# field added later (an older worker's, a test's) still builds.
_REQUIRED = max(i for i, f in enumerate(FIELDS) if not f.null)
RoundResult = dataclasses.make_dataclass(
    "RoundResult",
    [(f.name, _annotation(f), dataclasses.field(default=None)) if i > _REQUIRED else (f.name, _annotation(f))
     for i, f in enumerate(FIELDS)],
    namespace={
        "to_dict": _to_dict,
        "from_parts": _from_parts,
        "__doc__": "What one federated round did and cost (round_fields.FIELDS).",
    },
    frozen=True,
)  # fmt: skip
RoundResult.__module__ = __name__  # pickles and prints as fedweb_engine.results.round_result.RoundResult

# The round record's columns, declared once (round_fields.FIELDS): whatever lists them (the API
# serializer, the CSV downloads, the Round model's conversions) takes them from this tuple.
ROUND_RESULT_FIELDS = tuple(f.name for f in FIELDS)


# -- the parts a round's record is built from (RoundResult.from_parts) ---------------------------


@dataclass(frozen=True)
class Counts:
    """Who took part: the round, its sampled clients and what became of them, the samples trained."""

    round: int
    participants: int
    completed: int
    stragglers: int
    dropped: int
    samples: int


@dataclass(frozen=True)
class Traffic:
    """The encoded payloads' bytes, both ways, beside the fp32 formula."""

    bytes_down: int
    bytes_up: int
    bytes_formula: int
    bytes_extra_down: int = 0  # of bytes_down: a client algorithm's buffers beside the model (fp32)
    bytes_extra_up: int = 0  # of bytes_up: what clients return beside their updates (fp32)


@dataclass(frozen=True)
class Timing:
    """Wall-clock seconds of the whole round and of its training (to the server step's end)."""

    round_seconds: float
    train_seconds: float


@dataclass(frozen=True)
class Memory:
    """What the process and its devices held after the round (``vram_*`` None on CPU), and where it ran."""

    rss_mb: float
    threads: int
    vram_allocated_mb: float | None
    vram_reserved_mb: float | None
    vram_peak_mb: float | None
    device: str

    @classmethod
    def of(cls, reading: Mapping[str, Any], device: str) -> Memory:
        """The round's figures from a memory probe's ``reading`` (which may hold more)."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "device"]
        return cls(**{name: reading[name] for name in names}, device=device)


def fp32_bytes_formula(num_params: int, cohort_size: int) -> int:
    """DESIGN.md's bandwidth formula for one round, with uncompressed fp32 weights (4 bytes each).

    (model sent down + update sent up) × sampled clients = 2 · 4 · params · cohort. It counts an
    upload for every sampled client, as a user computing it beforehand would: dropped clients and
    stragglers are what the measured ``bytes_up`` shows beside it.
    """
    return 8 * num_params * cohort_size


QUANTILES = (10, 25, 50, 75, 90)
PARTICIPATION_BINS = 20  # the histogram's length whatever the number of clients and rounds


def quantile_fields(prefix: str, values: list[float]) -> dict[str, float | None]:
    """``{prefix_p10: …, prefix_p90: …}`` over the finite ``values`` (None for each if there are none)."""
    finite = np.asarray([v for v in values if v == v and abs(v) != float("inf")], dtype=np.float64)
    if finite.size == 0:
        return {f"{prefix}_p{q}": None for q in QUANTILES}
    return {f"{prefix}_p{q}": float(v) for q, v in zip(QUANTILES, np.percentile(finite, QUANTILES), strict=True)}


def mean_and_worst10(accuracies: list[float]) -> tuple[float | None, float | None]:
    """The mean of the finite ``accuracies`` and the mean of their worst 10% (at least one client)."""
    finite = sorted(a for a in accuracies if a == a)
    if not finite:
        return None, None
    worst = finite[: max(1, len(finite) // 10)]
    return sum(finite) / len(finite), sum(worst) / len(worst)


def accuracy_fields(accuracies: list[float]) -> dict[str, float | None]:
    """The client_accuracy_* fields of a round: quantiles, mean and the worst 10% clients' mean."""
    fields = quantile_fields("client_accuracy", accuracies)
    fields["client_accuracy_mean"], fields["client_accuracy_worst10"] = mean_and_worst10(accuracies)
    return fields


def personal_accuracy_fields(accuracies: list[float]) -> dict[str, float | None]:
    """The personal_accuracy_* fields: the same mean and worst 10%, of each client's personal model."""
    mean, worst = mean_and_worst10(accuracies)
    return {"personal_accuracy_mean": mean, "personal_accuracy_worst10": worst}


def participation_histogram(counts) -> list[int]:
    """How many clients were sampled 0, 1, … times (``counts`` per client), in PARTICIPATION_BINS bins."""
    capped = np.minimum(np.asarray(counts, dtype=np.int64), PARTICIPATION_BINS - 1)
    return np.bincount(capped, minlength=PARTICIPATION_BINS).tolist()
