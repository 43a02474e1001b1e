"""What a strategy that needs every client's update implies elsewhere: the combinations the spec
refuses, the memory the capacity check counts, and an isolated round writing the same rows."""

import pytest
import torch

from fedweb_engine import Spec
from fedweb_engine.estimates.capacity import Limits, check_capacity, estimate
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import SpecError
from fedweb_engine.strategies.robust import BLOCK_SCRATCH_BYTES

ROBUST = ("median", "trimmed_mean", "krum")
BIG = {
    "model": {"name": "mlp", "hidden": 4096},
    "participation": {"clients_per_round": 50},
    "compute": {"client_group_size": 8},
}


@pytest.mark.parametrize("name", ROBUST)
def test_it_refuses_dp_with_a_strategy_that_needs_every_update(name):
    with pytest.raises(SpecError, match=rf"^algorithm\.name {name} needs every client's update; DP") as e:
        Spec.from_dict({"algorithm": {"name": name}, "privacy": {"mechanism": "gaussian"}})
    assert e.value.field == "algorithm.name"


@pytest.mark.parametrize("ranks", [2, "auto"])
def test_it_refuses_ranks_with_a_strategy_that_needs_every_update(ranks):
    with pytest.raises(SpecError, match=r"^algorithm\.name krum needs every client's update in one process"):
        Spec.from_dict({"algorithm": {"name": "krum"}, "compute": {"ranks": ranks}})


def test_it_still_accepts_dp_and_ranks_with_streaming_strategies():
    Spec.from_dict({"algorithm": {"name": "fedavg"}, "privacy": {"mechanism": "gaussian"}})
    Spec.from_dict({"algorithm": {"name": "fedadam"}, "compute": {"ranks": 2}})


def test_the_capacity_estimate_counts_the_largest_cohorts_updates():
    fedavg = estimate(Spec.from_dict({**BIG, "algorithm": {"name": "fedavg"}}))
    median = estimate(Spec.from_dict({**BIG, "algorithm": {"name": "median"}}))
    scheduled = estimate(
        Spec.from_dict({**BIG, "rounds": 2, "algorithm": {"name": "median"}, "participation": {"schedule": [5, 80]}})
    )

    extra = median.state_bytes - fedavg.state_bytes
    assert extra >= 50 * 4 * fedavg.params  # the [50, P] fp32 rows at least
    # plus their weights, the aggregate and the rules' bounded scratch, no more
    assert extra <= 51 * 4 * fedavg.params + 50 * 4 + BLOCK_SCRATCH_BYTES
    assert scheduled.state_bytes - fedavg.state_bytes >= 80 * 4 * fedavg.params  # the schedule's largest
    assert median.round_bytes - fedavg.round_bytes == extra


def test_a_round_too_large_for_its_updates_names_the_cohort_size():
    spec = Spec.from_dict({**BIG, "algorithm": {"name": "trimmed_mean"}, "participation": {"clients_per_round": 100}})
    fits_fedavg = estimate(spec.replace(algorithm={"name": "fedavg"})).round_bytes
    limits = Limits(max_round_memory_bytes_cpu=fits_fedavg + 1)

    check_capacity(spec.replace(algorithm={"name": "fedavg"}), limits, "cpu")
    with pytest.raises(SpecError, match=r"^participation\.clients_per_round is too large for one round"):
        check_capacity(spec, limits, "cpu")


def test_an_isolated_round_writes_the_same_rows_as_an_in_process_one():
    raw = {
        "seed": 2,
        "rounds": 1,
        "data": {"dataset": "digits", "num_clients": 8, "image_size": 8},
        "model": {"name": "logistic"},
        "participation": {"clients_per_round": 5},
        "algorithm": {"name": "median"},
        "compute": {"device": "cpu", "client_group_size": 2},
    }
    inline = Simulation(Spec.from_dict(raw))
    isolated = Simulation(Spec.from_dict(raw).replace(compute={"isolation": "process"}))

    inline.next_round()
    isolated.next_round()

    assert torch.equal(isolated.collected.updates, inline.collected.updates)
    assert torch.equal(isolated.collected.weights, inline.collected.weights)
    assert torch.equal(isolated.global_flat, inline.global_flat)
    assert inline.collected.weights.shape == (5,) and (inline.collected.weights > 0).all()
