"""What this server accepts (:class:`Limits`) and what a spec will cost (:class:`Estimate`).

Plain data, no torch: the web process builds its limits from settings and reads estimates that
:mod:`fedweb_engine.estimates.capacity` computes (in that process when it has torch, else in the
helper process of :mod:`fedweb_engine.estimates.helper`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

GB = 10**9


@dataclass(frozen=True)
class Limits:
    """What this server accepts; a spec over any of them is refused before anything is stored.

    The defaults fit every preset on a CPU and on one GPU, with room for much larger runs.
    """

    max_params: int = 100_000_000
    max_round_memory_bytes_cpu: int = 32 * GB
    max_round_memory_bytes_gpu: int = 80 * GB
    max_rounds: int = 100_000
    max_clients: int = 500_000
    max_dataset_bytes: int = 16 * GB


# The settings (environment variables) that set each limit, for the messages.
LIMIT_SETTINGS = {
    "max_params": "FEDWEB_MAX_PARAMS",
    "max_round_memory_bytes_cpu": "FEDWEB_MAX_ROUND_MEMORY_CPU",
    "max_round_memory_bytes_gpu": "FEDWEB_MAX_ROUND_MEMORY_GPU",
    "max_rounds": "FEDWEB_MAX_ROUNDS",
    "max_clients": "FEDWEB_MAX_CLIENTS",
    "max_dataset_bytes": "FEDWEB_MAX_DATASET",
}


@dataclass(frozen=True)
class Estimate:
    """The cost of a spec; every ``*_bytes`` is per round on one training device, except ``dataset_bytes``."""

    device_kind: str  # "cpu" or "gpu"
    params: int
    model_bytes: int  # fp32 weights
    slots: int  # clients trained at once: the group's slots, or 1 when trained one by one
    state_bytes: int
    buffer_bytes: int
    activation_bytes: int
    eval_bytes: int
    round_bytes: int
    dataset_bytes: int | None  # None: read from files, unknown until loaded

    def to_dict(self) -> dict:
        return asdict(self)
