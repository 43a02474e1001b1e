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
    bytes_formula: int  # uncompressed fp32 estimate: 4·params·(cohort down + reporting clients up)
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
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RoundResult:
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})


ROUND_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(RoundResult))
