"""``npz``: a dataset from NumPy ``.npz`` files you already have (a built-in written like a plugin).

Two layouts, both under the datasets folder (``$FEDWEB_DATA_DIR/datasets``):

* one file with ``x_train``/``y_train`` and optionally ``x_test``/``y_test`` (without them the
  engine holds out ``data.test_fraction``);
* a folder with one file per client (``x``/``y``, in file-name order) and optionally ``test.npz``:
  the files are the writers, so ``partition: natural`` gives every file its own client.

Files are opened with ``allow_pickle=False``: an object array is refused instead of unpickled, so a
hostile file cannot run code. Array headers are read before any data, so an oversized (or lying)
file is refused before it is decompressed.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext, DatasetShape, option
from fedweb_engine.data.paths import confine, default_data_root
from fedweb_engine.data.pool import Pool
from fedweb_engine.spec.schema import SpecError

FIELD = "data.options.path"
WHERE = "must name an .npz file or a folder of .npz files inside the server's datasets folder, relative to it"
TEST_FILE = "test.npz"
MAX_FILES = 100_000  # clients in a folder
MAX_BYTES = 16 * 2**30  # every array together, as stored: the loader's memory, before the capacity limit


@dataclass(frozen=True)
class NpzOptions:
    path: str = option("", "An .npz file, or a folder of one .npz per client, under the datasets folder.", path=True)
    x_key: str = option("x", "Name of the samples array ('x' in a client file, 'x_train'/'x_test' in one file).")
    y_key: str = option("y", "Name of the labels array ('y', or 'y_train'/'y_test').")
    num_classes: int = option(0, "Classes; 0 takes one more than the largest label.", min=0, max=1_000_000)


@dataclass(frozen=True)
class _Layout:
    """Where the arrays are: (file, x key, y key) per training part (one per client for folders)."""

    train: list[tuple[Path, str, str]]
    test: tuple[Path, str, str] | None
    writers: list[str] | None


def describe(options: NpzOptions, context: DataContext) -> DatasetShape:
    """Shape and rows from the arrays' headers; samples are never read (only the labels, and only
    when ``num_classes`` is 0, to count the classes)."""
    layout = _layout(options, context.data_root or default_data_root())
    shapes = _check_headers(layout)
    x_shape, x_dtype = shapes[0]
    rows = sum(shape[0] for shape, _ in shapes[: len(layout.train)])
    sample = int(np.prod(x_shape[1:], dtype=np.int64)) * (1 if x_dtype == np.uint8 else 4) + 8
    classes = options.num_classes or _largest_label(layout) + 1
    return DatasetShape(tuple(x_shape[1:]), classes, rows, sample)


@registry.dataset("npz", NpzOptions, natural=True, describe=describe, context=True)
def load(options: NpzOptions, rng: np.random.Generator, context: DataContext) -> Pool:
    """Samples from ``.npz`` files: x as float32 (uint8 images stay uint8 and are scaled to [0, 1]
    per batch), labels int64; a folder's files are the natural writers."""
    layout = _layout(options, context.data_root or default_data_root())
    _check_headers(layout)
    parts = [_read(*where) for where in layout.train]
    x_train = torch.cat([x for x, _ in parts])
    y_train = torch.cat([y for _, y in parts])
    x_test, y_test = _read(*layout.test) if layout.test else (None, None)
    labels_max = int(max(y_train.max(), y_test.max() if y_test is not None and len(y_test) else -1))
    num_classes = options.num_classes or labels_max + 1
    if labels_max >= num_classes:
        raise SpecError("data.options.num_classes", f"must be > {labels_max}, the largest label in the files")
    writer_ids = np.repeat(np.arange(len(parts)), [len(y) for _, y in parts]) if layout.writers else None
    return Pool(
        x_train=x_train,
        y_train=y_train,
        x_test=x_test,
        y_test=y_test,
        num_classes=num_classes,
        input_shape=tuple(x_train.shape[1:]),
        writer_ids=writer_ids,
        writer_names=layout.writers,
    )


# -- finding the files --------------------------------------------------------------------------


def _layout(options: NpzOptions, root: str | Path) -> _Layout:
    try:
        target = confine(options.path, root)
    except SpecError:
        raise SpecError(FIELD, WHERE) from None
    x, y = options.x_key, options.y_key
    if target.is_file() and target.suffix == ".npz":
        keys = _keys(target)
        if f"{x}_train" not in keys:  # one file without a split: every row trains
            return _Layout([(target, x, y)], None, None)
        test = (target, f"{x}_test", f"{y}_test") if f"{x}_test" in keys else None
        return _Layout([(target, f"{x}_train", f"{y}_train")], test, None)
    if target.is_dir():
        files = sorted(p for p in target.glob("*.npz") if p.name != TEST_FILE and p.is_file())
        if len(files) > MAX_FILES:
            raise SpecError(FIELD, f"holds {len(files)} client files; at most {MAX_FILES} are read")
        if files:
            test = target / TEST_FILE
            return _Layout(
                [(f, x, y) for f in files], (test, x, y) if test.is_file() else None, [f.stem for f in files]
            )
    raise SpecError(FIELD, WHERE)  # missing, empty or another kind of file: the same words as outside


def _keys(path: Path) -> set[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return {name.removesuffix(".npy") for name in z.namelist()}
    except (OSError, zipfile.BadZipFile):
        raise SpecError(FIELD, f"{path.name} is not an .npz file") from None


# -- headers, then data ---------------------------------------------------------------------------


def _header(path: Path, key: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of ``key`` in ``path``, read from its .npy header only."""
    try:
        with zipfile.ZipFile(path) as z, z.open(f"{key}.npy") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _fortran, dtype = read(f, max_header_size=10_000)
    except KeyError:
        raise SpecError(FIELD, f"{path.name} has no array {key!r}") from None
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise SpecError(FIELD, f"{path.name}: {key} is not a NumPy array ({e})") from None
    if dtype.hasobject:
        raise SpecError(FIELD, f"{path.name}: {key} holds Python objects; only numeric arrays are read")
    return tuple(shape), dtype


def _check_headers(layout: _Layout) -> list[tuple[tuple[int, ...], np.dtype]]:
    """Every x's (shape, dtype), training parts first; refuses mismatched, non-numeric or oversized arrays."""
    parts = layout.train + ([layout.test] if layout.test else [])
    shapes, total = [], 0
    for path, x_key, y_key in parts:
        (x_shape, x_dtype), (y_shape, y_dtype) = _header(path, x_key), _header(path, y_key)
        if len(x_shape) < 2 or not (np.issubdtype(x_dtype, np.number) or x_dtype == np.bool_):
            raise SpecError(
                FIELD, f"{path.name}: {x_key} must be a numeric array of samples [N, ...], not {x_dtype} {x_shape}"
            )
        if y_shape != x_shape[:1] or not np.issubdtype(y_dtype, np.integer):
            raise SpecError(FIELD, f"{path.name}: {y_key} must be {x_shape[0]} integer labels, not {y_dtype} {y_shape}")
        if shapes and x_shape[1:] != shapes[0][0][1:]:
            raise SpecError(FIELD, f"{path.name}: samples of shape {x_shape[1:]} differ from {shapes[0][0][1:]}")
        shapes.append((x_shape, x_dtype))
        total += int(np.prod(x_shape, dtype=np.int64)) * x_dtype.itemsize + x_shape[0] * y_dtype.itemsize
    if total > MAX_BYTES:
        raise SpecError(FIELD, f"holds {total:,} bytes of arrays; at most {MAX_BYTES:,} bytes are read")
    if sum(s[0] for s, _ in shapes[: len(layout.train)]) == 0:
        raise SpecError(FIELD, "holds no training samples")
    return shapes


def _largest_label(layout: _Layout) -> int:
    largest = -1
    for path, _x_key, y_key in layout.train + ([layout.test] if layout.test else []):
        y = _labels(path, y_key)
        largest = max(largest, int(y.max()) if len(y) else -1)
    return largest


def _labels(path: Path, y_key: str) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as f:
            y = f[y_key]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise SpecError(FIELD, f"{path.name} could not be read ({e})") from None
    if (y < 0).any():
        raise SpecError(FIELD, f"{path.name}: {y_key} has negative labels")
    return y


def _read(path: Path, x_key: str, y_key: str) -> tuple[torch.Tensor, torch.Tensor]:
    y = _labels(path, y_key)
    try:
        with np.load(path, allow_pickle=False) as f:
            x = f[x_key]
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise SpecError(FIELD, f"{path.name} could not be read ({e})") from None
    x_t = torch.from_numpy(np.ascontiguousarray(x if x.dtype == np.uint8 else x.astype(np.float32, copy=False)))
    return x_t, torch.from_numpy(y.astype(np.int64, copy=False))
