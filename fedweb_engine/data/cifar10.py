"""CIFAR-10 from the standard python batches (``cifar-10-batches-py``), read without trusting pickle.

The batches are pickles. Plain ``pickle.load`` runs whatever a crafted file names, so they are read
with :class:`RestrictedUnpickler`, which only rebuilds numpy arrays and refuses every other global.
"""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape
from fedweb_engine.data.paths import required_path
from fedweb_engine.data.pool import Pool, missing_path
from fedweb_engine.spec.schema import SpecError

TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_BATCH = "test_batch"
SAMPLES = 60_000


@dataclass(frozen=True)
class Cifar10Options:
    path: str | None = required_path("Folder of cifar-10-batches-py")


def describe(options: Cifar10Options, context: DataContext) -> DatasetShape:
    return DatasetShape((3, 32, 32), 10, 50_000, 3 * 32 * 32 + 8)  # uint8 pixels, int64 label


SHAPE = (3, 32, 32)

# What the standard batches (and numpy's own pickling, old and new module names) need, nothing more.
ALLOWED_GLOBALS = frozenset(
    {
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy.core.numeric", "_frombuffer"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"),
        ("numpy", "dtype"),
    }
)


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` limited to latin-1: how protocol-2 pickles written by Python 3 store bytes."""
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refusing _codecs.encode with encoding {encoding!r}")
    return text.encode("latin-1")


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only numpy array reconstruction; anything else is refused."""

    def find_class(self, module: str, name: str):
        if (module, name) == ("_codecs", "encode"):
            return _latin1_encode
        if (module, name) not in ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data file")
        return super().find_class(module, name)


def restricted_load(data: bytes) -> object:
    """Unpickle ``data`` with :class:`RestrictedUnpickler` (bytes keys, as CIFAR's Python 2 pickles need)."""
    return RestrictedUnpickler(io.BytesIO(data), encoding="bytes").load()


@registry.dataset("cifar10", Cifar10Options, describe=describe, context=True)
def load(options: Cifar10Options, rng: np.random.Generator, context: DataContext) -> Pool:
    """uint8 images [N, 3, 32, 32] (no mean/std normalisation; ``as_input`` maps them to [0, 1]),
    the five training batches as the pool and ``test_batch`` as the test set."""
    folder = _folder(options.path)
    x_train, y_train = zip(*(_read_batch(folder / name) for name in TRAIN_BATCHES), strict=True)
    x_test, y_test = _read_batch(folder / TEST_BATCH)
    return Pool(
        x_train=torch.from_numpy(np.concatenate(x_train)),
        y_train=torch.from_numpy(np.concatenate(y_train)),
        x_test=torch.from_numpy(x_test),
        y_test=torch.from_numpy(y_test),
        num_classes=10,
        input_shape=SHAPE,
    )


def _folder(path: str | None) -> Path:
    expected = "a folder with data_batch_1..5 and test_batch (or the folder holding cifar-10-batches-py)"
    if not path:
        raise missing_path(expected, path)
    for folder in (Path(path) / "cifar-10-batches-py", Path(path)):
        if all((folder / name).is_file() for name in (*TRAIN_BATCHES, TEST_BATCH)):
            return folder
    raise missing_path(expected, path)


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        batch = restricted_load(path.read_bytes())
        data = _get(batch, "data")
        labels = _get(batch, "labels")
        x = np.asarray(data, dtype=np.uint8).reshape(-1, *SHAPE)  # rows are R(1024) G(1024) B(1024)
        y = np.asarray(labels, dtype=np.int64).reshape(-1)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise SpecError("data.options.path", f"{path.name} is not a CIFAR-10 python batch ({e})") from None
    if len(x) != len(y):
        raise SpecError("data.options.path", f"{path.name} has {len(x)} images but {len(y)} labels")
    return x, y


def _get(batch: object, key: str):
    """A batch field under a bytes key (the original Python 2 files) or a str key."""
    if not isinstance(batch, dict):
        raise TypeError("the pickle does not hold a dict")
    return batch[key.encode()] if key.encode() in batch else batch[key]
