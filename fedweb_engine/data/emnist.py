"""Federated EMNIST from files users already have: TFF's HDF5 files and LEAF's JSON folders.

Pixels are kept as stored (only quantised to uint8, which is lossless for these 8-bit scans):
TFF's ``fed_emnist_*.h5`` are inverted, 1.0 = white background and 0.0 = ink, and so are LEAF's
FEMNIST JSON values. Models learn either polarity; do not compare them with non-inverted data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape
from fedweb_engine.data.paths import required_path
from fedweb_engine.data.pool import Pool, missing_path, to_uint8
from fedweb_engine.spec.schema import SpecError

H5_NAMES = ("fed_emnist_train.h5", "fed_emnist_digitsonly_train.h5")
SHAPE = (1, 28, 28)
# Training rows, for the capacity estimate only (the files are not opened): TFF's 62-class
# Federated EMNIST and LEAF's FEMNIST (about 90% of its 805,263 samples).
H5_TRAIN_SAMPLES = 671_585
LEAF_TRAIN_SAMPLES = 725_000


@dataclass(frozen=True)
class EmnistH5Options:
    path: str | None = required_path("TFF's fed_emnist_train.h5 (its test file beside it)")


@dataclass(frozen=True)
class FemnistLeafOptions:
    path: str | None = required_path("LEAF FEMNIST folder with train/ and test/")


def describe_h5(options: EmnistH5Options, context: DataContext) -> DatasetShape:
    return DatasetShape(SHAPE, 10, H5_TRAIN_SAMPLES, 28 * 28 + 8)


def describe_leaf(options: FemnistLeafOptions, context: DataContext) -> DatasetShape:
    return DatasetShape(SHAPE, 62, LEAF_TRAIN_SAMPLES, 28 * 28 + 8)


# -- TFF HDF5 --------------------------------------------------------------------------------------


@registry.dataset("emnist_h5", EmnistH5Options, natural=True, describe=describe_h5, context=True)
def load_h5(options: EmnistH5Options, rng: np.random.Generator, context: DataContext) -> Pool:
    """``examples/<client>/pixels`` and ``examples/<client>/label`` from the train and test files.

    The natural partition reads only the first ``num_clients`` writers (sorted ids); other
    partitions pool every writer. The test set is the whole test file, pooled.
    """
    train_path, test_path = _h5_paths(options.path)
    writers = _h5_writers(train_path)
    if context.partition == "natural":
        if context.num_clients > len(writers):
            raise SpecError("data.num_clients", f"must be <= {len(writers)}, the writers in {train_path.name}")
        writers = writers[: context.num_clients]
    x_train, y_train, writer_ids = _read_h5(train_path, writers)
    x_test, y_test, _ = _read_h5(test_path, _h5_writers(test_path))
    digits_only = "digitsonly" in train_path.name
    num_classes = max(10 if digits_only else 62, int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1)
    return Pool(
        x_train=to_uint8(x_train).reshape(-1, *SHAPE),
        y_train=torch.from_numpy(y_train),
        x_test=to_uint8(x_test).reshape(-1, *SHAPE),
        y_test=torch.from_numpy(y_test),
        num_classes=num_classes,
        input_shape=SHAPE,
        writer_ids=writer_ids,
        writer_names=writers,
    )


def _h5_paths(path: str | None) -> tuple[Path, Path]:
    expected = "a folder with fed_emnist_train.h5 and fed_emnist_test.h5 (or the train file itself)"
    if not path:
        raise missing_path(expected, path)
    p = Path(path)
    if p.is_dir():
        found = [p / name for name in H5_NAMES if (p / name).is_file()]
        if not found:
            raise missing_path(expected, path)
        p = found[0]
    if not p.is_file() or "_train" not in p.name:
        raise missing_path(expected, path)
    test = p.with_name(p.name.replace("_train", "_test"))
    if not test.is_file():
        raise SpecError("data.options.path", f"needs the test file {test.name} beside {p.name} in {p.parent}")
    return p, test


def _h5_writers(path: Path) -> list[str]:
    import h5py  # only needed for this dataset

    try:
        with h5py.File(path, "r") as f:
            return sorted(f["examples"].keys())
    except (OSError, KeyError) as e:
        raise SpecError("data.options.path", f"{path.name} is not a Federated EMNIST HDF5 file ({e})") from None


def _read_h5(path: Path, writers: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import h5py

    xs, ys, counts = [], [], []
    with h5py.File(path, "r") as f:
        examples = f["examples"]
        for w in writers:
            xs.append(np.asarray(examples[w]["pixels"], dtype=np.float32).reshape(-1, 28, 28))
            ys.append(np.asarray(examples[w]["label"], dtype=np.int64).reshape(-1))
            counts.append(len(ys[-1]))
    return _concat(xs, ys, counts)


# -- LEAF JSON -------------------------------------------------------------------------------------


@registry.dataset("femnist_leaf", FemnistLeafOptions, natural=True, describe=describe_leaf, context=True)
def load_leaf(options: FemnistLeafOptions, rng: np.random.Generator, context: DataContext) -> Pool:
    """LEAF FEMNIST: ``train/*.json`` and ``test/*.json`` with ``users`` and ``user_data``; 62 classes.

    Natural partition: the first ``num_clients`` users in sorted order; the test set is every
    test file pooled.
    """
    root = Path(options.path or "")
    expected = "a LEAF FEMNIST folder with train/*.json and test/*.json"
    train_files, test_files = sorted(root.glob("train/*.json")), sorted(root.glob("test/*.json"))
    if not options.path or not train_files or not test_files:
        raise missing_path(expected, options.path)
    train = _read_leaf(train_files)
    users = sorted(train)
    if context.partition == "natural":
        if context.num_clients > len(users):
            raise SpecError("data.num_clients", f"must be <= {len(users)}, the users in {root / 'train'}")
        users = users[: context.num_clients]
    test = _read_leaf(test_files)
    x_train, y_train, writer_ids = _concat(*_unzip(train, users))
    x_test, y_test, _ = _concat(*_unzip(test, sorted(test)))
    return Pool(
        x_train=to_uint8(x_train).reshape(-1, *SHAPE),
        y_train=torch.from_numpy(y_train),
        x_test=to_uint8(x_test).reshape(-1, *SHAPE),
        y_test=torch.from_numpy(y_test),
        num_classes=max(62, int(max(y_train.max(initial=0), y_test.max(initial=0))) + 1),
        input_shape=SHAPE,
        writer_ids=writer_ids,
        writer_names=users,
    )


def _read_leaf(files: list[Path]) -> dict[str, dict]:
    """Every user's ``{"x", "y"}`` across files (a user may be split over several files)."""
    users: dict[str, dict] = {}
    for path in files:
        try:
            with open(path) as f:
                blob = json.load(f)
            for user, data in blob["user_data"].items():
                entry = users.setdefault(user, {"x": [], "y": []})
                entry["x"].extend(data["x"])
                entry["y"].extend(data["y"])
        except (ValueError, KeyError, TypeError) as e:
            raise SpecError("data.options.path", f"{path} is not a LEAF JSON file ({e!r})") from None
    return users


def _unzip(users: dict[str, dict], names: list[str]) -> tuple[list, list, list]:
    xs = [np.asarray(users[u]["x"], dtype=np.float32).reshape(-1, 28, 28) for u in names]
    ys = [np.asarray(users[u]["y"], dtype=np.int64).reshape(-1) for u in names]
    return xs, ys, [len(y) for y in ys]


def _concat(xs: list, ys: list, counts: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    writer_ids = np.repeat(np.arange(len(counts)), counts)
    if not xs:
        return np.zeros((0, 28, 28), np.float32), np.zeros(0, np.int64), writer_ids
    return np.concatenate(xs), np.concatenate(ys), writer_ids
