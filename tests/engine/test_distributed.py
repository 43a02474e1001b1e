"""A round split over the ranks of a torch.distributed group (Gloo, CPU) equals the undistributed
round up to the order of the floating-point sums, for every kind of state a round carries: the
server optimizer's, the client algorithm's per-client rows, DP's clip norm and noise, top-k's
error-feedback residuals. The ranks here are threads of one process meeting through an in-memory
store (the same group, collectives and code as separate processes; tests/engine/test_distributed_cli.py
runs real processes)."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.distributed as dist

from fedweb_engine.distributed.group import SETUPS, RankFailure, RankGroup
from fedweb_engine.distributed.member import NoClientFiles
from fedweb_engine.distributed.rank_round import run_rank_round
from fedweb_engine.distributed.share import RankRows, plan_share
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec, SpecError
from tests.conftest import TINY_SPEC

BASE = {**TINY_SPEC, "participation": {"clients_per_round": 7}, "compute": {"device": "cpu", "client_group_size": 2}}
METRICS = ("train_loss", "test_loss", "test_accuracy", "update_norm", "train_loss_p50", "train_loss_p90",
           "dp_clip_norm", "dp_clipped_fraction", "client_accuracy_mean", "personal_accuracy_mean")  # fmt: skip
EXACT = ("participants", "completed", "stragglers", "dropped", "samples", "bytes_up", "bytes_down", "bytes_formula")


def _ranked(spec: Spec, size: int, rounds: int, tmp_path, timeout: float = 60.0):
    """Rank 0's simulation and results, after ``rounds`` rounds over ``size`` ranks (threads)."""
    store = dist.HashStore()
    out: dict[int, tuple] = {}
    errors: list[BaseException] = []

    def rank_main(k: int) -> None:
        try:
            if k == 0:
                sim = Simulation(spec, client_state_dir=tmp_path / "client_state")
            else:
                sim = Simulation(spec, client_state=RankRows, client_files=NoClientFiles())
            group = RankGroup.join(store, k, size, device=torch.device("cpu"), timeout=timeout)
            out[k] = (sim, [run_rank_round(sim, group) for _ in range(rounds)])
            group.close()
        except BaseException as e:  # reported below, with the rank
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(k,)) for k in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors, errors
    return out[0]


def _alone(spec: Spec, rounds: int, tmp_path):
    sim = Simulation(spec, client_state_dir=tmp_path / "alone")
    return sim, [sim.next_round() for _ in range(rounds)]


def _assert_same(got, expected) -> None:
    for g, e in zip(got, expected, strict=True):
        for key in EXACT:
            assert getattr(g, key) == getattr(e, key), (g.round, key)
        for key in METRICS:
            a, b = getattr(g, key), getattr(e, key)
            assert (a is None) == (b is None), (g.round, key)
            if a is not None:
                assert a == pytest.approx(b, abs=1e-5, rel=0), (g.round, key)


CASES = {
    "fedavg": {},
    "fedadam": {"algorithm": {"name": "fedadam", "server_optimizer": "adam", "server_lr": 0.05}},
    "scaffold": {"algorithm": {"client": {"name": "scaffold"}}},
    "ditto": {"algorithm": {"client": {"name": "ditto", "options": {"lam": 0.1}}},
              "data": {**TINY_SPEC["data"], "client_test_fraction": 0.2}, "evaluation": {"clients": "sampled"}},
    "dp-fedavg": {"privacy": {"mechanism": "gaussian", "noise_multiplier": 0.5, "clip_norm": 0.5,
                              "adaptive_clip": True, "count_noise": 2.0}},
    "topk-error-feedback": {"communication": {"uplink": {"name": "topk", "options": {"ratio": 0.1}},
                                              "error_feedback": True}},
    "stragglers-and-dropout": {"heterogeneity": {"straggler_fraction": 0.3, "straggler_policy": "partial",
                                                 "dropout": 0.15}, "algorithm": {"client": {"name": "fedprox"}}},
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_two_ranks_equal_the_undistributed_run(case, tmp_path):
    spec = Spec.from_dict({**BASE, **CASES[case], "rounds": 4})
    alone, expected = _alone(spec, 4, tmp_path)
    sim, got = _ranked(spec, 2, 4, tmp_path)
    _assert_same(got, expected)
    assert torch.allclose(sim.global_flat, alone.global_flat, atol=1e-5, rtol=0)
    assert sim.rng.bit_generator.state == alone.rng.bit_generator.state  # the same draws, whatever the ranks
    assert [r.ranks for r in got] == [2] * 4 and all(len(r.rank_train_seconds) == 2 for r in got)
    assert all(r.allreduce_seconds is not None and r.allreduce_seconds >= 0 for r in got)


def test_three_ranks_with_fewer_clients_than_ranks_some_idle(tmp_path):
    spec = Spec.from_dict({**BASE, "participation": {"clients_per_round": 2}, "rounds": 3,
                           "algorithm": {"client": {"name": "scaffold"}}})  # fmt: skip
    _, expected = _alone(spec, 3, tmp_path)
    _, got = _ranked(spec, 3, 3, tmp_path)
    _assert_same(got, expected)


def test_the_plan_does_not_depend_on_the_number_of_ranks():
    sim = Simulation(Spec.from_dict(BASE))
    cohort = sim.sample_cohort(sim.rng)
    state = sim.rng.bit_generator.state
    seen = {}
    for size in (1, 2, 3):
        rows = {}
        for rank in range(size):
            rng = type(sim.rng)(type(sim.rng.bit_generator)())
            rng.bit_generator.state = state
            for g in plan_share(rng, cohort, sim.offsets, rank=rank, size=size, group_size=2, epochs=1, batch_size=10):
                for i in range(g.real):
                    rows[int(g.clients[i])] = g.idx[i][g.active[i] > 0].tolist()
            after = rng.bit_generator.state
        seen[size] = (rows, after)
    assert seen[1] == seen[2] == seen[3]  # every client trains once, on the same batches; the same draws
    assert sorted(seen[1][0]) == sorted(int(c) for c in cohort.trained)


def test_a_rank_that_fails_makes_the_others_fail_at_once_not_hang(tmp_path):
    spec = Spec.from_dict({**BASE, "rounds": 3})
    store = dist.HashStore()
    seen: dict[int, BaseException] = {}

    def rank_main(k: int) -> None:
        sim = Simulation(spec)
        group = RankGroup.join(store, k, 2, device=torch.device("cpu"), timeout=30)
        run_rank_round(sim, group)
        if k == 1:
            group.close()  # as a killed process's sockets close
            return
        try:
            run_rank_round(sim, group)
        except RankFailure as e:
            seen[k] = e

    threads = [threading.Thread(target=rank_main, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert isinstance(seen.get(0), RankFailure)
    assert "rank 0 of 2" in str(seen[0])


def test_a_rank_that_stalls_is_given_up_on_after_the_timeout(tmp_path):
    spec = Spec.from_dict({**BASE, "rounds": 2})
    store = dist.HashStore()
    joined, release = threading.Event(), threading.Event()
    failure: list[RankFailure] = []

    def stalled() -> None:
        group = RankGroup.join(store, 1, 2, device=torch.device("cpu"), timeout=30)
        joined.set()
        release.wait(30)  # never calls the round's collectives
        group.close()

    t = threading.Thread(target=stalled)
    t.start()
    sim = Simulation(spec)
    group = RankGroup.join(store, 0, 2, device=torch.device("cpu"), timeout=30)
    joined.wait(30)
    group.set_timeout(1.0)
    with pytest.raises(RankFailure) as e:
        run_rank_round(sim, group)
    release.set()
    t.join(30)
    failure.append(e.value)
    assert "timeout 1 s" in str(failure[0])


def test_each_group_is_set_up_once_however_many_rounds(tmp_path):
    before = SETUPS["count"]
    _ranked(Spec.from_dict({**BASE, "rounds": 5}), 2, 5, tmp_path)
    assert SETUPS["count"] - before == 2  # one set-up per rank (two ranks), not one per round


def test_ranks_are_read_from_specs_old_and_new():
    assert Spec.from_dict({**BASE, "compute": {"ranks": "auto"}}).compute.ranks == 0
    assert Spec.from_dict(BASE).compute.ranks == 1
    # Specs stored before ranks split rounds with compute.shards: it means ranks.
    assert Spec.from_stored({**BASE, "compute": {"device": "cpu", "shards": 3}}).compute.ranks == 3
    assert Spec.from_dict({**BASE, "compute": {"shards": "auto"}}).compute.ranks == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"compute": {"ranks": 2, "isolation": "process"}}, "compute.isolation"),
        ({"compute": {"ranks": 2}, "algorithm": {"name": "median"}}, "algorithm.name"),
        ({"compute": {"ranks": "many"}}, "compute.ranks"),
        ({"compute": {"ranks": 65}}, "compute.ranks"),
        ({"compute": {"ranks": -1}}, "compute.ranks"),
    ],
)
def test_what_ranks_cannot_do_is_refused_naming_the_field(change, field):
    with pytest.raises(SpecError) as e:
        Spec.from_dict({**BASE, **change})
    assert e.value.field == field
