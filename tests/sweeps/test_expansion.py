"""Sweep expansion: grid and seeded random points x seeds, every point validated like a single
experiment, errors naming the field and the point, a run limit, and all-or-none storage."""

from __future__ import annotations

import pytest

from orchestrator.models import Experiment, Sweep
from orchestrator.sweeps.create import create_sweep
from orchestrator.sweeps.expand import SweepError, expand
from tests.conftest import TINY_SPEC

MU_AXES = {"algorithm.mu": [0, 0.01, 0.1, 1], "seed": [0, 1, 2]}
BASE = {**TINY_SPEC, "algorithm": {"name": "fedprox"}}


def test_it_expands_a_grid_of_values_times_seeds():
    runs = expand(BASE, MU_AXES)
    assert len(runs) == 12
    assert [(p["algorithm.mu"], p["seed"]) for p, _ in runs[:4]] == [(0, 0), (0, 1), (0, 2), (0.01, 0)]
    assert {(s.algorithm.mu, s.seed) for _, s in runs} == {(m, s) for m in (0, 0.01, 0.1, 1) for s in (0, 1, 2)}


def test_it_combines_several_swept_fields_in_grid_order():
    runs = expand(BASE, {"algorithm.mu": [0, 1], "local.lr": [0.1, 0.01]})
    assert [(p["algorithm.mu"], p["local.lr"]) for p, _ in runs] == [(0, 0.1), (0, 0.01), (1, 0.1), (1, 0.01)]
    assert all(p["seed"] == TINY_SPEC["seed"] for p, _ in runs)  # no seed axis: the base spec's seed


def test_it_draws_the_same_random_sample_for_the_same_seed():
    axes = {"algorithm.mu": [0, 0.01, 0.1, 1, 2], "local.lr": [0.1, 0.05, 0.01], "seed": [0, 1]}
    first = [p for p, _ in expand(BASE, axes, mode="random", samples=4, sample_seed=7)]
    again = [p for p, _ in expand(BASE, axes, mode="random", samples=4, sample_seed=7)]
    other = [p for p, _ in expand(BASE, axes, mode="random", samples=4, sample_seed=8)]
    assert first == again and len(first) == 8
    assert len({(p["algorithm.mu"], p["local.lr"]) for p in first}) == 4  # 4 distinct configurations
    assert first != other


def test_it_sweeps_a_choice_field_and_rederives_what_depends_on_it():
    runs = expand({**TINY_SPEC, "algorithm": {"name": "fedavg", "server_optimizer": "sgd"}},
                  {"algorithm.name": ["fedavg", "fedadam"]})  # fmt: skip
    assert [s.algorithm.name for _, s in runs] == ["fedavg", "fedadam"]


def test_it_names_the_field_and_the_point_of_an_invalid_value():
    with pytest.raises(SweepError) as e:
        expand(BASE, {"algorithm.mu": [0, -1], "seed": [0, 1]})
    assert list(e.value.errors) == ["spec.algorithm.mu"]
    assert e.value.errors["spec.algorithm.mu"][0].startswith("point mu=-1 seed=0: algorithm.mu")


def test_it_refuses_a_base_with_an_old_key_its_component_lacks_naming_the_real_options():
    with pytest.raises(SweepError) as e:
        expand({**TINY_SPEC, "model": {"name": "mlp", "width": 1e308}}, {"seed": [0, 1]})
    assert list(e.value.errors) == ["spec.model.width"]
    assert "is not an option of model 'mlp': its options are hidden" in e.value.errors["spec.model.width"][0]


@pytest.mark.parametrize(
    ("axes", "message"),
    [
        ({}, "axes must map at least one spec field"),
        ({"algorithm.nu": [1]}, "axes.algorithm.nu is not a spec field"),
        ({"algorithm.mu": []}, "axes.algorithm.mu must be a non-empty list"),
        ({"algorithm.mu": 1}, "axes.algorithm.mu must be a non-empty list"),
    ],
)
def test_it_refuses_bad_axes_naming_the_field(axes, message):
    with pytest.raises(SweepError) as e:
        expand(BASE, axes)
    assert message in e.value.errors["axes"][0]


def test_it_refuses_a_sweep_over_the_run_limit_before_building_it(settings):
    settings.FEDWEB_SWEEP_MAX_RUNS = 11
    with pytest.raises(SweepError) as e:
        expand(BASE, {"local.lr": [0.1 / (i + 1) for i in range(10**3)], "algorithm.mu": list(range(10**3))})
    assert "1000000 runs, over the limit of 11 (FEDWEB_SWEEP_MAX_RUNS)" in e.value.errors["axes"][0]
    with pytest.raises(SweepError):
        expand(BASE, MU_AXES)  # 12 > 11


@pytest.mark.django_db
def test_it_stores_nothing_unless_every_point_is_valid(user):
    before = Experiment.objects.count()
    with pytest.raises(SweepError):
        create_sweep(owner=user, name="bad", base=BASE, axes={"algorithm.mu": [0, 1, -5]})
    assert Sweep.objects.count() == 0 and Experiment.objects.count() == before


@pytest.mark.django_db
def test_it_creates_and_queues_every_run_of_a_sweep(user, enqueued):
    sweep = create_sweep(owner=user, name="mu", base=BASE, axes=MU_AXES)
    runs = list(sweep.experiments.order_by("pk"))
    assert len(runs) == 12 and {e.status for e in runs} == {"queued"}
    assert runs[1].name == "mu · mu=0 seed=1" and runs[1].spec["seed"] == 1
    assert sweep.config_fields == ["algorithm.mu"]


@pytest.mark.django_db
def test_it_cancels_and_deletes_the_sweep_as_a_unit(user, enqueued):
    sweep = create_sweep(owner=user, name="mu", base=BASE, axes={"algorithm.mu": [0, 1]}, start=False)
    assert sweep.cancel(by="alice") == 2
    assert set(sweep.experiments.values_list("status", flat=True)) == {"cancelled"}
    sweep.delete()
    assert not Experiment.objects.filter(name__startswith="mu ·").exists()
