"""What a spec will cost, asked without importing torch: the web server's way into the engine's
estimates. Each question is answered by :mod:`~fedweb_engine.estimates.answers`, in this process
when it has torch, else in the helper process (:mod:`~fedweb_engine.estimates.helper`)."""

from __future__ import annotations

from pathlib import Path

from fedweb_engine.estimates.helper import ask
from fedweb_engine.estimates.server_limits import Estimate, Limits
from fedweb_engine.spec.schema import DataSpec, Spec


def check_new_spec(spec: Spec, limits: Limits, device_kind: str, datasets_root: str | Path) -> Estimate:
    """The spec's :class:`Estimate` on a ``device_kind`` worker, or ``SpecError`` naming the field
    over one of ``limits`` or the path option leading out of ``datasets_root``."""
    return ask("check_new_spec", spec, limits, device_kind, str(datasets_root))


def payload_sizes(spec: Spec) -> dict[str, int]:
    """``{"params", "down", "up", "model_down", "model_up", "extra_down", "extra_up"}``: the model's
    parameters and one client's payload bytes each way, in all and split into the model's (encoded)
    and the client algorithm's (fp32)."""
    return ask("payload_sizes", spec)


def train_samples(data: DataSpec) -> int:
    """The dataset's training rows."""
    return ask("train_samples", data)


def partition_summary(data: DataSpec, seed: int, max_clients: int) -> dict:
    """Samples and label counts of the first ``max_clients`` clients."""
    return ask("partition_summary", data, seed, max_clients)
