"""Partition functions on tiny, hand-checkable label arrays."""

import numpy as np
import pytest

from fedweb_engine.data import partition


def _rng(seed=0):
    return np.random.default_rng(seed)


def _assert_exact_cover(parts, n):
    joined = np.sort(np.concatenate(parts))
    assert np.array_equal(joined, np.arange(n))


def test_it_splits_iid_into_near_equal_parts():
    # Execute
    parts = partition.iid(10, 3, _rng())

    # Assert
    _assert_exact_cover(parts, 10)
    assert sorted(len(p) for p in parts) == [3, 3, 4]
    assert all(p.dtype == np.int64 for p in parts)


def test_it_deals_shards_of_single_labels():
    # Prepare: 4 labels x 3 samples, 4 clients x 1 shard of 3 -> each client one label
    labels = np.repeat([0, 1, 2, 3], 3)

    # Execute
    parts = partition.shards(labels, 4, 1, _rng())

    # Assert
    _assert_exact_cover(parts, 12)
    assert [len(p) for p in parts] == [3, 3, 3, 3]
    assert sorted(len(set(labels[p])) for p in parts) == [1, 1, 1, 1]


def test_it_gives_each_client_shards_per_client_shards():
    # Prepare: 8 labels x 2 samples; 4 clients x 2 shards of 2 samples -> at most 2 labels each
    labels = np.repeat(np.arange(8), 2)

    # Execute
    parts = partition.shards(labels, 4, 2, _rng(1))

    # Assert
    _assert_exact_cover(parts, 16)
    assert all(len(p) == 4 for p in parts)
    assert all(len(set(labels[p])) <= 2 for p in parts)


def test_it_mixes_labels_uniformly_when_alpha_is_large():
    # Prepare
    labels = np.repeat(np.arange(4), 100)

    # Execute
    parts = partition.dirichlet(labels, 4, 1e4, _rng())

    # Assert: every client holds about 25 of each label
    _assert_exact_cover(parts, 400)
    counts = np.array([np.bincount(labels[p], minlength=4) for p in parts])
    assert np.all(np.abs(counts - 25) <= 3)


def test_it_concentrates_labels_when_alpha_is_small():
    # Prepare
    labels = np.repeat(np.arange(4), 100)

    # Execute
    parts = partition.dirichlet(labels, 4, 1e-3, _rng())

    # Assert: each label lives (almost) entirely on one client
    _assert_exact_cover(parts, 400)
    counts = np.array([np.bincount(labels[p], minlength=4) for p in parts])
    assert np.all(counts.max(axis=0) >= 95)


def test_it_splits_by_writer_in_sorted_order():
    # Prepare
    writer_ids = np.array([2, 0, 2, 1, 0])

    # Execute
    parts = partition.natural(writer_ids)

    # Assert
    assert [p.tolist() for p in parts] == [[1, 4], [3], [0, 2]]


def test_it_fills_empty_clients_from_the_largest():
    # Prepare
    parts = [np.array([0, 1, 2, 3]), np.array([], dtype=np.int64), np.array([4])]

    # Execute
    fixed = partition.ensure_nonempty(parts, _rng())

    # Assert
    _assert_exact_cover(fixed, 5)
    assert [len(p) for p in fixed] == [3, 1, 1]


def test_it_refuses_to_fill_more_clients_than_samples():
    with pytest.raises(ValueError):
        partition.ensure_nonempty([np.array([0]), np.array([], dtype=np.int64), np.array([], dtype=np.int64)], _rng())


def test_it_holds_out_a_stratified_fraction():
    # Prepare
    labels = np.repeat([0, 1], [10, 20])

    # Execute
    train, test = partition.holdout(labels, 0.2, _rng())

    # Assert
    assert np.bincount(labels[test]).tolist() == [2, 4]
    _assert_exact_cover([train, test], 30)


def test_it_is_deterministic_for_a_seed():
    labels = np.repeat(np.arange(5), 20)
    a = partition.dirichlet(labels, 7, 0.5, _rng(3))
    b = partition.dirichlet(labels, 7, 0.5, _rng(3))
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
