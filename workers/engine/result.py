"""RoundResult: the one record per round shared by the engine, database, API, WebSocket and charts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RoundResult:
    """What one federated round did and cost. The CLI prints exactly these keys as JSON."""

    round: int  # 1-based round number
    participants: int  # clients sampled (the cohort)
    completed: int  # clients whose update was aggregated
    stragglers: int  # clients in the cohort that could do only part of the local work
    dropped: int  # clients whose update was not aggregated (dropout, or stragglers under 'drop')
    train_loss: float | None  # sample-weighted mean local training loss of the aggregated clients
    test_loss: float | None  # global model on the test set; None on rounds without evaluation
    test_accuracy: float | None
    bytes_down: int  # encoded payload bytes sent to the cohort
    bytes_up: int  # encoded payload bytes received from reporting clients
    bytes_formula: int  # uncompressed fp32 estimate for the whole cohort: see fp32_bytes_formula
    round_seconds: float
    train_seconds: float
    samples: int  # training samples processed (sum over clients and local steps)
    rss_mb: float  # resident memory of the process running the simulation (with isolation: not the child's)
    threads: int
    vram_allocated_mb: float | None
    vram_reserved_mb: float | None
    vram_peak_mb: float | None
    device: str
    # Federated evaluation (evaluation.clients): the global model on each evaluated client's own
    # test split, as a distribution; None on rounds without it. Quantiles, not every client: bounded.
    client_accuracy_p10: float | None = None
    client_accuracy_p25: float | None = None
    client_accuracy_p50: float | None = None
    client_accuracy_p75: float | None = None
    client_accuracy_p90: float | None = None
    client_accuracy_mean: float | None = None
    client_accuracy_worst10: float | None = None  # mean over the worst 10% of the evaluated clients
    # Quantiles of the aggregated clients' mean local training losses this round.
    train_loss_p10: float | None = None
    train_loss_p25: float | None = None
    train_loss_p50: float | None = None
    train_loss_p75: float | None = None
    train_loss_p90: float | None = None
    # participation_histogram[k]: clients sampled exactly k times so far (the last bin: that many or more).
    participation_histogram: list[int] | None = None
    # DP-FedAvg (privacy.mechanism): the clip norm used, the share of reported updates it clipped,
    # and ε at privacy.delta spent so far (filled in by the worker's accountant, not the engine).
    dp_clip_norm: float | None = None
    dp_clipped_fraction: float | None = None
    dp_epsilon: float | None = None

    def to_dict(self) -> dict:
        """The record as JSON-able values, keyed in ``ROUND_RESULT_FIELDS`` order."""
        return dataclasses.asdict(self)


# The round record's columns, declared once (by the dataclass above): whatever lists them (the API
# serializer, the CSV downloads, the Round model's conversions) takes them from this tuple.
ROUND_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(RoundResult))


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


def accuracy_fields(accuracies: list[float]) -> dict[str, float | None]:
    """The client_accuracy_* fields of a round: quantiles, mean and the worst 10% clients' mean."""
    fields = quantile_fields("client_accuracy", accuracies)
    finite = sorted(a for a in accuracies if a == a)
    worst = finite[: max(1, len(finite) // 10)]
    fields["client_accuracy_mean"] = sum(finite) / len(finite) if finite else None
    fields["client_accuracy_worst10"] = sum(worst) / len(worst) if finite else None
    return fields


def participation_histogram(counts) -> list[int]:
    """How many clients were sampled 0, 1, … times (``counts`` per client), in PARTICIPATION_BINS bins."""
    capped = np.minimum(np.asarray(counts, dtype=np.int64), PARTICIPATION_BINS - 1)
    return np.bincount(capped, minlength=PARTICIPATION_BINS).tolist()
