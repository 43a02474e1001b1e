"""Datasets and partitions: ``build_data(spec, seed)`` gives every client's samples in one tensor.

Loaders (one module per dataset family) return a :class:`Pool`; ``build_data`` splits its
training rows between clients with the functions in :mod:`.partition` and sorts the rows by
client. No network access, ever: datasets are bundled (digits), generated, or files you have.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext
from fedweb_engine.data import partition
from fedweb_engine.data.base import FederatedData, as_input
from fedweb_engine.data.paths import confine, default_data_root
from fedweb_engine.data.pool import Pool
from fedweb_engine.spec.schema import DataSpec, SpecError

__all__ = ["FederatedData", "as_input", "build_data", "load_pool", "partition_summary"]


def context_of(data: DataSpec, data_root=None) -> DataContext:
    """The :class:`DataContext` a ``context=True`` loader (or ``describe``) gets for ``data``."""
    return DataContext(
        test_fraction=data.test_fraction, data_root=data_root, num_clients=data.num_clients, partition=data.partition
    )


def load_pool(spec: DataSpec, rng: np.random.Generator, *, data_root: str | Path | None = None) -> Pool:
    """The registered loader's pool for ``spec.name``, its path options confined to ``data_root``
    (default: :func:`~.paths.default_data_root`), with ``test_fraction`` held out when the loader
    gives no test set (stratified for classification)."""
    component = registry.get("dataset", spec.name)
    options = spec.options
    paths = [f.name for f in dataclasses.fields(options) if f.metadata.get("path")]
    if paths:
        root = default_data_root() if data_root is None else data_root
        confined = {name: str(confine(getattr(options, name) or "", root, f"data.options.{name}")) for name in paths}
        options = dataclasses.replace(options, **confined)
    if component.traits.get("context"):
        pool = component.factory(options, rng, context_of(spec, None if data_root is None else Path(data_root)))
    else:
        pool = component.factory(options, rng)
    if not isinstance(pool, Pool):
        raise TypeError(f"dataset {spec.name!r} returned {type(pool).__name__}, not a Pool")
    if pool.x_test is None:
        pool = _hold_out_test(pool, spec.test_fraction, rng)
    return pool


def _hold_out_test(pool: Pool, fraction: float, rng: np.random.Generator) -> Pool:
    labels = pool.y_train.numpy() if pool.task == "classification" else np.zeros(len(pool.y_train), np.int64)
    train, test = partition.holdout(labels, fraction, rng)
    train_t, test_t = torch.from_numpy(np.asarray(train)), torch.from_numpy(np.asarray(test))
    writer_ids = None if pool.writer_ids is None else pool.writer_ids[np.asarray(train)]
    return dataclasses.replace(
        pool,
        x_train=pool.x_train[train_t],
        y_train=pool.y_train[train_t],
        x_test=pool.x_train[test_t],
        y_test=pool.y_train[test_t],
        writer_ids=writer_ids,
    )


def build_data(spec: DataSpec, seed: int, *, data_root: str | Path | None = None) -> FederatedData:
    """Load or generate ``spec.name``, hold out its test set and split the training samples
    between ``spec.num_clients`` clients; the same (spec, seed) always gives identical tensors.

    Files are read only inside ``data_root`` (default: :func:`~.paths.default_data_root`); path
    options are relative to it, and a path leading anywhere else is a ``data.options.<field>`` error.
    """
    # Separate streams: changing the partition must not change the generated samples.
    pool = load_pool(spec, np.random.default_rng([seed, 0]), data_root=data_root)
    parts, names = _split(spec, pool, np.random.default_rng([seed, 1]))
    if spec.client_test_fraction > 0:
        # Its own stream, so that the training split of a run without client tests is unchanged.
        parts, tests = partition.hold_out_per_client(parts, spec.client_test_fraction, np.random.default_rng([seed, 2]))
        return _with_client_tests(_assemble(pool, parts, names), pool, tests)
    return _assemble(pool, parts, names)


def partition_summary(spec: DataSpec, seed: int, max_clients: int | None = 100) -> dict:
    """Samples and label counts of the first ``max_clients`` clients (the dashboard's preview)."""
    return build_data(spec, seed).summary(max_clients)


def _split(spec: DataSpec, pool: Pool, rng: np.random.Generator) -> tuple[partition.Parts, list[str] | None]:
    n = len(pool.y_train)
    if spec.num_clients > n:
        raise SpecError("data.num_clients", f"must be <= {n}, the training samples of {spec.name}")
    if spec.partition == "natural":
        return _natural(spec, pool)
    if spec.partition == "iid":
        parts = partition.iid(n, spec.num_clients, rng)
    else:
        if pool.task != "classification":
            raise SpecError(
                "data.partition", f"'{spec.partition}' needs class labels; use iid or natural for {spec.name}"
            )
        labels = pool.y_train.numpy()
        if spec.partition == "dirichlet":
            parts = partition.dirichlet(labels, spec.num_clients, spec.alpha, rng)
        elif spec.partition == "shards":
            parts = partition.shards(labels, spec.num_clients, spec.shards_per_client, rng)
        else:
            raise SpecError("data.partition", f"must be iid, dirichlet, shards or natural, not {spec.partition!r}")
    return partition.ensure_nonempty(parts, rng), None


def _natural(spec: DataSpec, pool: Pool) -> tuple[partition.Parts, list[str] | None]:
    if pool.writer_ids is None or pool.writer_names is None:
        raise SpecError("data.partition", f"'natural' needs a dataset with writers, not {spec.name}")
    parts = partition.natural(pool.writer_ids)
    present = np.unique(pool.writer_ids)
    if len(parts) < spec.num_clients:
        raise SpecError("data.num_clients", f"must be <= {len(parts)}, the writers in {spec.name}")
    names = [pool.writer_names[int(w)] for w in present[: spec.num_clients]]
    return parts[: spec.num_clients], names


def _assemble(pool: Pool, parts: partition.Parts, names: list[str] | None) -> FederatedData:
    order = torch.from_numpy(np.concatenate(parts))
    sizes = torch.tensor([len(p) for p in parts], dtype=torch.int64)
    offsets = torch.zeros(len(parts) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(sizes, 0)
    if torch.equal(order, torch.arange(len(order))):
        x_train, y_train = pool.x_train, pool.y_train  # already sorted by client (natural splits): no copy
    else:
        x_train, y_train = pool.x_train[order].contiguous(), pool.y_train[order].contiguous()
    return FederatedData(
        x_train=x_train,
        y_train=y_train,
        offsets=offsets,
        x_test=pool.x_test,
        y_test=pool.y_test,
        num_classes=pool.num_classes,
        input_shape=pool.input_shape,
        task=pool.task,
        writers=names,
    )


def _with_client_tests(data: FederatedData, pool: Pool, tests: partition.Parts) -> FederatedData:
    """Attach each client's held-out rows (from the pool's training rows), sorted by client."""
    order = torch.from_numpy(np.concatenate(tests)) if tests else torch.zeros(0, dtype=torch.int64)
    offsets = torch.zeros(len(tests) + 1, dtype=torch.int64)
    offsets[1:] = torch.cumsum(torch.tensor([len(t) for t in tests], dtype=torch.int64), 0)
    data.x_client_test = pool.x_train[order].contiguous()
    data.y_client_test = pool.y_train[order].contiguous()
    data.client_test_offsets = offsets
    return data
