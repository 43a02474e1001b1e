"""Built federated datasets, kept per process and reused: a switch to another experiment on the
same data (every run of a sweep, every seed of a model comparison) does not build the data again.

``build_data`` is deterministic in its key (the data section of the spec, the seed and the data
root), so a cached :class:`FederatedData` is the one a fresh build would give. The cache is
bounded in bytes (the tensors' sizes), not entries, and evicts the least recently used dataset;
one larger than the whole bound is built and returned but not kept. A simulation holds its own
reference, so an evicted dataset lives exactly as long as the simulations that use it.

Plain PyTorch: the engine CLI and the Celery workers share it; the workers set the bound from
``FEDWEB_DATA_CACHE_BYTES``.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from pathlib import Path

from fedweb_engine.data import build_data
from fedweb_engine.data.base import FederatedData
from fedweb_engine.spec.schema import DataSpec

DEFAULT_MAX_BYTES = 2 * 10**9


class DataCache:
    """A least-recently-used map from a dataset's key to its built :class:`FederatedData`."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES):
        self.max_bytes = max_bytes
        self.builds = 0  # datasets built by this cache (a miss); a hit builds nothing
        self.hits = 0
        self._entries: OrderedDict[str, tuple[FederatedData, int]] = OrderedDict()
        self._lock = threading.Lock()  # one builder at a time: two identical builds would waste both

    @property
    def nbytes(self) -> int:
        """Bytes of every dataset the cache holds now (never more than ``max_bytes``)."""
        return sum(size for _, size in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, spec: DataSpec, seed: int, *, data_root: str | Path | None = None) -> FederatedData:
        """The data ``build_data(spec, seed, data_root=data_root)`` gives, built at most once while cached."""
        key = data_key(spec, seed, data_root)
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                return self._entries[key][0]
            data = build_data(spec, seed, data_root=data_root)
            self.builds += 1
            size = data.nbytes()
            if size <= self.max_bytes:
                self._entries[key] = (data, size)
                self._shrink()
            return data

    def resize(self, max_bytes: int) -> None:
        """Change the bound, evicting the least recently used datasets that no longer fit."""
        with self._lock:
            self.max_bytes = max_bytes
            self._shrink()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def _shrink(self) -> None:
        while self._entries and self.nbytes > self.max_bytes:
            self._entries.popitem(last=False)


def data_key(spec: DataSpec, seed: int, data_root: str | Path | None) -> str:
    """Everything that determines a built dataset: name, options, partition and its parameters,
    number of clients, test splits (all of ``spec``), the seed and where files are read from."""
    root = None if data_root is None else str(Path(data_root).resolve())
    return json.dumps([dataclasses.asdict(spec), seed, root], sort_keys=True, default=str)


# The process's cache: Simulation takes its data from here.
shared = DataCache()
