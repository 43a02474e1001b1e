"""FedProx is one thing in one place: the client algorithm ``fedprox`` with μ. The server strategy of
that name (FedAvg's server step under FedProx's label) is gone from new specs; stored specs that name
it keep loading and computing exactly what they computed."""

from __future__ import annotations

import pytest

from fedweb_engine.components import registry
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec, SpecError, spec_fields

TINY = {
    "seed": 5,
    "rounds": 2,
    "data": {"name": "digits", "num_clients": 12, "options": {"image_size": 8}},
    "model": {"name": "mlp", "options": {"hidden": 16}},
    "participation": {"clients_per_round": 4},
    "local": {"epochs": 2, "batch_size": 8, "lr": 0.1},
    "heterogeneity": {"straggler_fraction": 0.5, "straggler_policy": "partial"},
    "compute": {"device": "cpu"},
}
EXPLICIT_PROX = {"name": "fedavg", "client": {"name": "fedprox", "options": {"mu": 0.5}}}


def _with(algorithm: dict) -> dict:
    return {**TINY, "algorithm": algorithm}


def _losses(spec: Spec) -> list[tuple[float, float]]:
    sim = Simulation(spec)
    return [(r.train_loss, r.test_loss) for r in (sim.next_round(), sim.next_round())]


@pytest.mark.parametrize(
    "stored",
    [
        {"name": "fedprox", "mu": 0.5},  # the flat spec of before client algorithms
        {
            "name": "fedprox",
            "server_optimizer": "sgd",
            "options": {},
            "client": {"name": "fedprox", "options": {"mu": 0.5}},
        },
    ],
    ids=["flat", "today's shape"],
)
def test_it_loads_an_old_server_side_fedprox_with_mu_as_the_fedprox_it_ran(stored):
    old = Spec.from_stored(_with(stored))

    assert old.algorithm.name == "fedavg"  # the server step the old strategy took
    assert (old.algorithm.client.name, old.algorithm.mu) == ("fedprox", 0.5)
    assert _losses(old) == _losses(Spec.from_dict(_with(EXPLICIT_PROX)))  # the same computation, to the bit


def test_it_loads_an_old_fedprox_label_on_fedavg_clients_as_the_fedavg_it_was():
    old = Spec.from_stored(_with({"name": "fedprox", "options": {}, "client": {"name": "fedavg", "options": {}}}))

    assert (old.algorithm.name, old.algorithm.client.name, old.algorithm.mu) == ("fedavg", "fedavg", 0.0)
    assert _losses(old) == _losses(Spec.from_dict(_with({"name": "fedavg"})))


@pytest.mark.parametrize("algorithm", [{"name": "fedprox"}, {"name": "fedprox", "client": {"name": "scaffold"}}])
def test_it_refuses_a_new_fedprox_label_on_another_client_algorithm(algorithm):
    with pytest.raises(SpecError) as e:
        Spec.from_dict(_with(algorithm))

    assert e.value.field == "algorithm.name"
    assert "client algorithm" in str(e.value) and "algorithm.client.name" in str(e.value)


@pytest.mark.parametrize(
    "algorithm",
    [
        {"name": "fedprox", "client": {"name": "fedprox", "options": {"mu": 0.5}}},
        {"name": "fedprox", "mu": 0.5},
    ],
)
def test_it_takes_fedprox_named_on_both_sides_as_the_fedprox_client_algorithm(algorithm):
    spec = Spec.from_dict(_with(algorithm))

    assert spec.to_dict()["algorithm"]["name"] == "fedavg"
    assert spec.algorithm.client.name == "fedprox" and spec.algorithm.mu == 0.5


def test_it_keeps_fedprox_with_mu_zero_labelled_as_such_in_a_new_spec():
    spec = Spec.from_dict(_with({"name": "fedprox", "mu": 0}))  # the paper's μ = 0 is still FedProx's run

    assert (spec.algorithm.client.name, spec.algorithm.mu) == ("fedprox", 0.0)


def test_it_offers_fedprox_only_as_a_client_algorithm():
    fields = spec_fields()

    assert "fedprox" not in registry.names("strategy")
    assert "fedprox" not in fields["algorithm.name"]["choices"]
    assert "fedprox" in fields["algorithm.client.name"]["choices"]
    assert "algorithm.client.options.fedprox.mu" in fields


@pytest.mark.parametrize("name", ["scaffold", "feddyn", "ditto"])
def test_it_tells_where_a_client_algorithm_named_as_the_server_strategy_goes(name):
    with pytest.raises(SpecError) as e:
        Spec.from_dict({"algorithm": {"name": name}})

    assert e.value.field == "algorithm.name"
    message = str(e.value)
    assert f"'{name}' is a client algorithm" in message and "algorithm.client.name" in message
    assert "fedavg" in message  # and what the server side takes
