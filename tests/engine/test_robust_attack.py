"""Robust strategies in real simulations: an attack FedAvg does not survive, the round's updates in
one buffer allocated once, and an exact resume from a checkpoint."""

import pytest
import torch

from fedweb_engine import Spec
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.strategies import weighted_average

BASE = {
    "seed": 1,
    "rounds": 5,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8, "partition": "iid"},
    "model": {"name": "logistic"},
    "participation": {"clients_per_round": 10},
    "local": {"epochs": 2, "batch_size": 10, "lr": 0.3},
    # One group holds the whole cohort: its first rows are the first clients of the round.
    "compute": {"device": "cpu", "client_group_size": 16},
}
ATTACKERS = 2  # of each cohort of 10: 20%
SCALE = 100.0


def simulation(name: str, *, options: dict | None = None, **changes) -> Simulation:
    return Simulation(Spec.from_dict(BASE).replace(algorithm={"name": name, "options": options or {}}, **changes))


def attack(sim: Simulation) -> None:
    """The test hook: the first ATTACKERS clients of every round send their update × SCALE, as the
    server decodes it (the uplink codec's decode is wrapped on this simulation only)."""
    decode = sim.uplink.decode

    def poisoned(payload, **kwargs):
        out = decode(payload, **kwargs)
        out[:ATTACKERS] *= SCALE
        return out

    sim.uplink.decode = poisoned


def record_steps(sim: Simulation) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """Wrap the strategy's step to keep a copy of what it was given (and where it lives)."""
    seen, step = [], sim.strategy.step

    def recording(global_flat, updates, weights):
        seen.append((updates.clone(), weights.clone(), updates.data_ptr()))
        step(global_flat, updates, weights)

    sim.strategy.step = recording
    return seen


@pytest.fixture(scope="module")
def clean():
    """The last round of FedAvg without an attack: the accuracy to keep."""
    return simulation("fedavg").run()[-1]


def test_trimmed_mean_keeps_its_accuracy_under_attack_while_fedavg_diverges(clean):
    fedavg = simulation("fedavg")
    attack(fedavg)
    attacked_fedavg = fedavg.run()[-1]
    robust = simulation("trimmed_mean", options={"beta": 0.2})
    attack(robust)
    attacked_robust = robust.run()[-1]

    assert clean.test_accuracy > 0.8
    assert attacked_fedavg.test_accuracy < clean.test_accuracy - 0.3
    assert attacked_fedavg.test_loss > 10 * clean.test_loss
    assert attacked_robust.test_accuracy > clean.test_accuracy - 0.05
    assert attacked_robust.test_loss < 1.5 * clean.test_loss


@pytest.mark.parametrize("name", ["median", "krum"])
def test_median_and_krum_survive_the_same_attack(name, clean):
    sim = simulation(name)
    attack(sim)

    result = sim.run()[-1]

    assert result.test_accuracy > clean.test_accuracy - 0.1


def test_the_strategy_gets_exactly_the_decoded_updates_and_sample_counts_fedavg_averages():
    # Same seed, same draws: both simulations train the same clients on the same batches, and
    # int8 makes the decoded updates differ from what the clients computed.
    changes = {"communication": {"uplink": "int8"}, "rounds": 1}
    fedavg, median = simulation("fedavg", **changes), simulation("median", **changes)
    seen = record_steps(median)
    before = fedavg.global_flat.clone()

    fedavg.next_round()
    median.next_round()

    ((updates, weights, _),) = seen
    assert updates.shape == (10, fedavg.num_params)
    assert torch.allclose(weighted_average(updates, weights), fedavg.global_flat - before, atol=1e-6)


def test_the_updates_buffer_is_allocated_once_and_rows_are_only_the_clients_that_report():
    changes = {
        "rounds": 4,
        "participation": {"schedule": [10, 5, 8, 3]},
        "heterogeneity": {"dropout": 0.2, "straggler_fraction": 0.2, "straggler_policy": "drop"},
    }
    sim = simulation("krum", **changes)
    buffer = sim.collected.updates
    seen = record_steps(sim)

    results = sim.run()

    assert buffer.shape == (10, sim.num_params)  # the largest cohort of the schedule
    assert sim.collected.updates is buffer
    assert {ptr for _, _, ptr in seen} == {buffer.data_ptr()}
    rows = [len(updates) for updates, _, _ in seen]
    assert rows == [r.participants - r.dropped for r in results] == [6, 3, 4, 1]
    assert all((weights > 0).all() for _, weights, _ in seen)


def test_streaming_strategies_keep_no_updates_buffer():
    assert simulation("fedavg").collected is None


def test_a_robust_run_resumes_from_a_checkpoint_exactly(tmp_path):
    changes = {"rounds": 4, "communication": {"uplink": "topk", "topk_ratio": 0.2}}
    straight = simulation("krum", **changes).run()
    first = simulation("krum", **changes)
    first.run(2)
    first.save_checkpoint(tmp_path / "ck.safetensors")

    resumed = Simulation.from_checkpoint(tmp_path / "ck.safetensors")
    rest = resumed.run()

    assert resumed.collected is not None and [r.round for r in rest] == [3, 4]
    for a, b in zip(straight[2:], rest, strict=True):
        assert (a.train_loss, a.test_loss, a.test_accuracy) == (b.train_loss, b.test_loss, b.test_accuracy)
