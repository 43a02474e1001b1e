"""Pool: a loaded dataset before it is split between clients, and helpers the loaders share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.spec.schema import SpecError


@dataclass
class Pool:
    """Training samples (not yet partitioned) and the held-out test set.

    ``writer_ids[i]`` is the natural client (writer, device) of training row ``i``: an index into
    ``writer_names``. Datasets without writers leave both ``None``. A loader whose files have no
    test split leaves ``x_test``/``y_test`` ``None``.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor | None  # None: the engine holds out data.test_fraction of the training rows
    y_test: torch.Tensor | None
    num_classes: int
    input_shape: tuple[int, ...]
    task: str = "classification"
    writer_ids: np.ndarray | None = None
    writer_names: list[str] | None = None


def writer_sizes(num_writers: int, mean: float, rng: np.random.Generator, low: int = 10) -> np.ndarray:
    """Samples per writer, lognormal like Federated EMNIST: mean about ``mean``, at least
    ``min(low, mean)``, at most ``5 * mean`` (the long tail would otherwise dominate memory)."""
    sigma = 0.6  # FEMNIST's per-writer counts have a coefficient of variation of about 0.6
    mu = np.log(mean) - sigma**2 / 2  # so that E[size] = mean before clipping
    sizes = np.round(rng.lognormal(mu, sigma, num_writers))
    return np.clip(sizes, min(low, mean), max(5 * mean, 1)).astype(np.int64)


def held_out_count(num_train: int, fraction: float) -> int:
    """Test samples so that they make up ``fraction`` of train + test."""
    return int(round(num_train * fraction / (1.0 - fraction)))


def missing_path(what: str, where: Path | str | None) -> SpecError:
    """The error every file loader raises when its files are not where the spec says."""
    return SpecError("data.options.path", f"must point to {what}; nothing usable found at {where!r}")


def to_uint8(pixels: np.ndarray) -> torch.Tensor:
    """Float pixels in [0, 1] to uint8 (4x less memory; ``as_input`` maps them back to [0, 1])."""
    return torch.from_numpy(np.clip(np.rint(pixels * 255.0), 0, 255).astype(np.uint8))
