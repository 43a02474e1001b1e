"""Federated evaluation: per-client accuracy quantiles, the worst 10% beside the mean, participation."""

import torch

from fedweb_engine import Simulation, Spec
from fedweb_engine.results.round_result import PARTICIPATION_BINS

SPEC = {
    "rounds": 6,
    "seed": 1,
    "data": {"num_clients": 20, "partition": "iid", "image_size": 8, "client_test_fraction": 0.3},
    "model": {"name": "mlp", "hidden": 32},
    "participation": {"clients_per_round": 10},
    "local": {"epochs": 2, "batch_size": 10, "lr": 0.3},
    "evaluation": {"clients": "cohort", "cohort_size": 20},
    "compute": {"device": "cpu"},
}


def _flip_half(sim: Simulation) -> None:
    """Half the clients (the even ones) hold data whose labels are shifted by one: the global model,
    trained by the federation, fails them. (Flipping their training labels too would make the two
    halves' labels cancel out in a 50/50 average, and the model would learn nothing for anyone.)"""
    data = sim.replicas[0].data
    for c in range(0, data.num_clients, 2):
        a, b = int(data.client_test_offsets[c]), int(data.client_test_offsets[c + 1])
        data.y_client_test[a:b] = (data.y_client_test[a:b] + 1) % 10


def test_it_shows_the_worst_10_percent_far_below_the_mean_when_half_the_clients_flip_their_labels():
    sim = Simulation(Spec.from_dict(SPEC))
    _flip_half(sim)
    last = sim.run()[-1]
    assert last.client_accuracy_mean is not None and last.client_accuracy_worst10 is not None
    assert last.client_accuracy_worst10 < last.client_accuracy_mean - 0.3
    assert last.client_accuracy_p10 <= last.client_accuracy_p50 <= last.client_accuracy_p90


def test_it_keeps_quantiles_of_the_clients_training_losses_and_a_bounded_participation_histogram():
    sim = Simulation(Spec.from_dict({**SPEC, "rounds": 3}))
    results = sim.run()
    for r in results:
        assert r.train_loss_p10 <= r.train_loss_p50 <= r.train_loss_p90
        assert len(r.participation_histogram) == PARTICIPATION_BINS
        assert sum(r.participation_histogram) == 20
    # 3 rounds × 10 sampled clients: the histogram's weighted sum counts every participation.
    assert sum(k * n for k, n in enumerate(results[-1].participation_histogram)) == 30


def test_it_leaves_the_client_fields_empty_without_federated_evaluation():
    spec = {**SPEC, "evaluation": {"clients": "none"}, "rounds": 1}
    result = Simulation(Spec.from_dict(spec)).next_round()
    assert result.client_accuracy_mean is None and result.client_accuracy_worst10 is None


def test_it_holds_out_each_clients_own_test_rows_apart_from_its_training_rows():
    sim = Simulation(Spec.from_dict(SPEC))
    data = sim.replicas[0].data
    assert torch.all(data.client_test_offsets[1:] - data.client_test_offsets[:-1] >= 1)
    assert len(data.y_train) + len(data.y_client_test) == int(sim.offsets[-1]) + len(data.y_client_test)
