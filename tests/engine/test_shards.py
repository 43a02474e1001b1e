"""A round split into shards, each trained by a different simulation (as on different workers),
equals the unsharded round up to the order of the floating-point sums."""

import pytest
import torch

from fedweb_engine.simulation import shards
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec, SpecError
from fedweb_engine.state.checkpoint import read_checkpoint
from tests.conftest import TINY_SPEC

SPEC = {**TINY_SPEC, "participation": {"clients_per_round": 7}, "compute": {"device": "cpu", "client_group_size": 2}}


def _sharded_run(spec: Spec, n: int, tmp_path, rounds: int) -> tuple[Simulation, list]:
    """The concluding simulation, and its results; the shards train on simulations of their own that
    are moved on only through the checkpoint the concluding one writes after each round."""
    lead, others = Simulation(spec), [Simulation(spec) for _ in range(n - 1)]
    results = []
    for r in range(1, rounds + 1):
        planned = shards.plan_round(lead, n)
        for k, sim in enumerate([lead, *others]):
            assert shards.plan_round(sim, n).rng_state == planned.rng_state  # every worker plans alike
            shards.write_partial(tmp_path / f"{r}-{k}", shards.train_shard(sim, shards.plan_round(sim, n), k))
        partials = [shards.read_partial(tmp_path / f"{r}-{k}") for k in range(n)]
        results.append(shards.conclude_round(lead, planned, partials, t0=0.0))
        lead.save_checkpoint(tmp_path / "published")
        for sim in others:  # what a worker does with the round's published model
            sim.load_state_dict(*read_checkpoint(tmp_path / "published"))
    return lead, results


@pytest.mark.parametrize("n", [2, 3])
def test_it_equals_the_unsharded_run_after_five_rounds(tmp_path, n):
    spec = Spec.from_dict(SPEC)
    whole = Simulation(spec)
    expected = [whole.next_round() for _ in range(5)]
    lead, got = _sharded_run(spec, n, tmp_path, 5)
    assert torch.allclose(lead.global_flat, whole.global_flat, atol=1e-5, rtol=0)
    assert [r.samples for r in got] == [r.samples for r in expected]
    assert [r.bytes_up for r in got] == [r.bytes_up for r in expected]
    assert [r.test_accuracy for r in got] == pytest.approx([r.test_accuracy for r in expected], abs=1e-5)
    assert lead.rng.bit_generator.state == whole.rng.bit_generator.state


def test_it_deals_clients_out_so_every_client_trains_once(tmp_path):
    sim = Simulation(Spec.from_dict(SPEC))
    planned = shards.plan_round(sim, 3)
    ids = [int(c) for groups in planned.shards for g in groups for c in g.clients[: g.real]]
    assert sorted(ids) == sorted(int(c) for c in planned.cohort.trained)
    assert [sum(g.real for g in groups) for groups in planned.shards] == [3, 2, 2]
    assert sim.round == 0 and planned.round == 1  # planning moved nothing


def test_it_accepts_auto_and_refuses_what_cannot_be_sharded():
    assert Spec.from_dict({**SPEC, "compute": {"shards": "auto"}}).compute.shards == 0
    assert Spec.from_dict(SPEC).compute.shards == 1
    with pytest.raises(SpecError) as e:
        Spec.from_dict({**SPEC, "compute": {"shards": 2, "isolation": "process"}})
    assert e.value.field == "compute.shards"
    with pytest.raises(SpecError) as e:
        Spec.from_dict({**SPEC, "compute": {"shards": 2}, "communication": {"uplink": "topk"}})
    assert e.value.field == "compute.shards"
    with pytest.raises(SpecError) as e:
        Spec.from_dict({**SPEC, "compute": {"shards": "many"}})
    assert e.value.field == "compute.shards"
