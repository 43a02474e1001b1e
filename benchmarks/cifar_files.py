"""Generated CIFAR-10-shaped data written in the standard python-batch format.

The engine has no generated 32x32x3 dataset, but its ``cifar10`` loader reads the standard
``data_batch_1..5`` / ``test_batch`` pickles. When no real CIFAR-10 is given (``$FEDWEB_CIFAR10``)
the pfl benchmark writes such files with generated, learnable images: one random colour template
per class plus per-image noise. Only plain dicts of numpy arrays and lists are pickled, which is
exactly what the engine's restricted unpickler accepts.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

ENV = "FEDWEB_CIFAR10"
PIXELS = 3 * 32 * 32


def real_cifar_path() -> str | None:
    """``$FEDWEB_CIFAR10`` when it names an existing folder (real data beats generated data)."""
    path = os.environ.get(ENV)
    return path if path and Path(path).is_dir() else None


def write_generated_cifar(folder: Path, num_train: int, num_test: int, seed: int = 0) -> Path:
    """Write ``num_train`` images over 5 training batches and ``num_test`` in the test batch."""
    rng = np.random.default_rng(seed)
    templates = rng.uniform(40, 215, (10, PIXELS))
    folder.mkdir(parents=True, exist_ok=True)
    chunks = np.array_split(np.arange(num_train), 5)
    for i, chunk in enumerate(chunks, start=1):
        _write_batch(folder / f"data_batch_{i}", len(chunk), templates, rng)
    _write_batch(folder / "test_batch", num_test, templates, rng)
    return folder


def _write_batch(path: Path, n: int, templates: np.ndarray, rng: np.random.Generator) -> None:
    labels = rng.integers(10, size=n)
    pixels = templates[labels] + rng.normal(0, 50, (n, PIXELS))
    data = np.clip(pixels, 0, 255).astype(np.uint8)
    with path.open("wb") as f:
        pickle.dump({b"data": data, b"labels": labels.tolist()}, f, protocol=2)
