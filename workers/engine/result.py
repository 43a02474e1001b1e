"""RoundResult: the one record per round shared by the engine, database, API, WebSocket and charts."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


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
