"""The per-process cache of built federated datasets: keyed by all that determines them, bounded
in bytes, least recently used evicted first, and flat in memory over hundreds of switches."""

import gc
import random

import psutil
import pytest
import torch

from fedweb_engine import Spec
from fedweb_engine.data import build_data
from fedweb_engine.data import cache as data_cache
from fedweb_engine.data.cache import DataCache
from fedweb_engine.simulation.runner import Simulation

SPEC = {
    "seed": 3,
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8},
    "model": {"name": "mlp", "hidden": 16},
    "participation": {"clients_per_round": 4},
    "compute": {"device": "cpu"},
}


def _spec(seed: int = 3, **data) -> Spec:
    return Spec.from_dict({**SPEC, "seed": seed, "data": {**SPEC["data"], **data}})


def test_it_builds_once_and_returns_what_a_fresh_build_gives():
    cache = DataCache()
    spec = _spec()
    first = cache.get(spec.data, spec.seed)
    assert cache.get(spec.data, spec.seed) is first
    assert (cache.builds, cache.hits) == (1, 1)
    fresh = build_data(spec.data, spec.seed)
    assert torch.equal(first.x_train, fresh.x_train) and torch.equal(first.offsets, fresh.offsets)


@pytest.mark.parametrize(
    "other",
    [_spec(seed=4), _spec(num_clients=21), _spec(partition="iid"), _spec(alpha=0.1), _spec(test_fraction=0.3),
     _spec(image_size=28)],
)  # fmt: skip
def test_it_builds_again_for_anything_that_determines_the_data(other):
    cache = DataCache()
    base = _spec()
    cache.get(base.data, base.seed)
    cache.get(other.data, other.seed)
    assert cache.builds == 2 and len(cache) == 2


def test_it_keys_on_the_data_root(tmp_path):
    cache = DataCache()
    spec = _spec()
    cache.get(spec.data, spec.seed, data_root=tmp_path / "a")
    cache.get(spec.data, spec.seed, data_root=tmp_path / "b")
    assert cache.builds == 2


def test_it_evicts_the_least_recently_used_to_stay_within_its_bytes():
    one = build_data(_spec().data, 3).nbytes()
    cache = DataCache(max_bytes=2 * one + one // 2)  # room for two of these datasets, not three
    a, b, c = _spec(seed=1), _spec(seed=2), _spec(seed=3)
    cache.get(a.data, a.seed)
    cache.get(b.data, b.seed)
    cache.get(a.data, a.seed)  # a is now the most recently used: b goes first
    cache.get(c.data, c.seed)
    assert len(cache) == 2 and cache.nbytes <= cache.max_bytes
    builds = cache.builds
    cache.get(a.data, a.seed)
    cache.get(c.data, c.seed)
    assert cache.builds == builds  # both kept
    cache.get(b.data, b.seed)
    assert cache.builds == builds + 1  # b was evicted


def test_it_does_not_keep_a_dataset_larger_than_its_bound():
    cache = DataCache(max_bytes=1000)
    spec = _spec()
    data = cache.get(spec.data, spec.seed)
    assert data.nbytes() > 1000 and len(cache) == 0 and cache.nbytes == 0


def test_resizing_evicts_what_no_longer_fits():
    cache = DataCache()
    for seed in (1, 2, 3):
        spec = _spec(seed=seed)
        cache.get(spec.data, spec.seed)
    one = cache.nbytes // 3
    cache.resize(one + 1)
    assert len(cache) == 1 and cache.nbytes <= one + 1


def test_a_simulation_takes_its_data_from_the_shared_cache(monkeypatch):
    monkeypatch.setattr(data_cache, "shared", DataCache())
    Simulation(_spec(seed=5))
    Simulation(_spec(seed=5).replace(model={"name": "mlp", "hidden": 8}))  # another model, same data
    assert (data_cache.shared.builds, data_cache.shared.hits) == (1, 1)


@pytest.mark.slow
def test_memory_stays_flat_over_hundreds_of_switches(monkeypatch):
    # 300 simulations built over six datasets (~0.5 MB each) in random order, through a cache with
    # room for three: about half the switches evict and rebuild. Keeping one dataset per build
    # would add ~70 MB; the cache's byte total must stay within its bound throughout.
    specs = [_spec(seed=s) for s in range(6)]
    one = build_data(specs[0].data, 0).nbytes()
    monkeypatch.setattr(data_cache, "shared", DataCache(max_bytes=3 * one + one // 2))
    rng = random.Random(0)
    process = psutil.Process()
    rss = []
    for i in range(300):
        sim = Simulation(rng.choice(specs))
        sim.close()
        del sim
        assert data_cache.shared.nbytes <= data_cache.shared.max_bytes
        if i % 50 == 49:
            gc.collect()
            rss.append(process.memory_info().rss)
    assert data_cache.shared.builds > 100 and data_cache.shared.hits > 100  # it really switched, and reused
    grown_mb = (max(rss[1:]) - rss[0]) / 2**20  # after a first warm-up block
    assert grown_mb < 25, f"RSS grew {grown_mb:.0f} MB over 250 switches: {[r // 2**20 for r in rss]} MB"
