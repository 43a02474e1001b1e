"""Client algorithms in whole simulations (issue 19): gains over FedAvg on a pathological split,
both training paths, checkpoints, composition with server strategies, and the spec rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedweb_engine.algorithms import ClientRound
from fedweb_engine.algorithms.scaffold import Scaffold
from fedweb_engine.communication.codecs import make_codec
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec, SpecError
from tests.engine.state_store_standin import InMemoryStates

TARGET = 0.9
# digits, 2 classes per client (the `shards` split), a logistic model: FedAvg's client drift is large.
SHARDS = {
    "seed": 0,
    "rounds": 30,
    "data": {"name": "digits", "num_clients": 20, "partition": "shards", "shards_per_client": 2},
    "model": {"name": "logistic"},
    "participation": {"clients_per_round": 10},
    "local": {"epochs": 2, "batch_size": 20, "lr": 0.05},
    "compute": {"device": "cpu"},
}


def _spec(client: dict, **sections) -> Spec:
    d = {**SHARDS, **sections}
    d["algorithm"] = {**d.get("algorithm", {}), "client": client}
    return Spec.from_dict(d)


def _run(spec: Spec, **kw):
    torch.manual_seed(0)
    sim = Simulation(spec, client_state=InMemoryStates(), **kw)
    return sim, sim.run()


def rounds_to(target: float, results) -> int | None:
    return next((r.round for r in results if r.test_accuracy is not None and r.test_accuracy >= target), None)


@pytest.fixture(scope="module")
def fedavg_rounds():
    return rounds_to(TARGET, _run(_spec({"name": "fedavg"}))[1])


@pytest.mark.slow
@pytest.mark.parametrize("client", [{"name": "scaffold"}, {"name": "feddyn", "options": {"alpha": 0.01}}])
def test_scaffold_and_feddyn_reach_the_target_in_fewer_rounds_than_fedavg_on_shards(client, fedavg_rounds):
    theirs = rounds_to(TARGET, _run(_spec(client))[1])
    assert theirs is not None, f"{client['name']} never reached {TARGET} in {SHARDS['rounds']} rounds"
    assert fedavg_rounds is None or theirs + 8 <= fedavg_rounds, (client["name"], theirs, fedavg_rounds)


@pytest.mark.slow
def test_ditto_personal_worst_10_percent_beats_fedavg_global():
    evaluation = {"data": {**SHARDS["data"], "client_test_fraction": 0.3}, "rounds": 10}
    evaluation["evaluation"] = {"clients": "cohort", "cohort_size": 20}
    _, fedavg = _run(_spec({"name": "fedavg"}, **evaluation))
    _, ditto = _run(_spec({"name": "ditto", "options": {"lam": 0.1}}, **evaluation))
    global_worst, personal_worst = fedavg[-1].client_accuracy_worst10, ditto[-1].personal_accuracy_worst10
    assert personal_worst is not None and global_worst is not None
    assert personal_worst >= global_worst + 0.1, (personal_worst, global_worst)
    # The Ditto run records its global model's worst 10% beside its personal models': FedAvg's.
    assert ditto[-1].client_accuracy_worst10 == pytest.approx(global_worst, abs=1e-6)
    assert fedavg[-1].personal_accuracy_worst10 is None
    # The global model of a Ditto run is FedAvg's: the same test accuracy, round for round.
    assert [r.test_accuracy for r in ditto] == pytest.approx([r.test_accuracy for r in fedavg], abs=1e-6)


@pytest.mark.parametrize("client", [{"name": "scaffold"}, {"name": "feddyn"}, {"name": "ditto"}])
def test_vectorised_and_sequential_simulations_agree(client):
    flats = []
    for mode in ("vectorized", "sequential"):
        spec = _spec(client, rounds=2, compute={"device": "cpu", "training": mode})
        sim, _ = _run(spec)
        flats.append(sim.global_flat.clone())
    torch.testing.assert_close(flats[0], flats[1], atol=1e-5, rtol=0)


def test_scaffold_composes_with_a_fedadam_server_step():
    spec = _spec({"name": "scaffold"}, rounds=4, algorithm={"name": "fedadam", "server_lr": 0.03})
    assert spec.algorithm.name == "fedadam" and spec.algorithm.client.name == "scaffold"
    sim, results = _run(spec)
    assert all(r.test_accuracy is not None and r.test_accuracy == r.test_accuracy for r in results)
    assert float(sim.client.server["c"].abs().sum()) > 0  # the server control variate moved
    assert results[-1].test_accuracy > 0.3


def test_the_server_state_of_a_client_algorithm_is_checkpointed(tmp_path):
    states = InMemoryStates()
    spec = _spec({"name": "scaffold"}, rounds=4)
    sim = Simulation(spec, client_state=states)
    sim.run(2)
    sim.save_checkpoint(tmp_path / "ck.safetensors")
    rest = sim.run()
    # The resumed run shares the per-client store (the real one is on disk: issue 19, part B).
    again = Simulation(spec, client_state=InMemoryStates())
    again.run(2)
    resumed = Simulation.from_checkpoint(
        tmp_path / "ck.safetensors", client_state=lambda name, n, w: states.stores[name]
    )
    assert resumed.round == 2 and float(again.client.server["c"].abs().sum()) > 0
    # The server control variate of round 2 comes back exactly (the per-client rows are the store's).
    torch.testing.assert_close(resumed.client.server["c"], again.client.server["c"], atol=0, rtol=0)
    assert rest[-1].round == 4


def test_a_stateful_client_algorithm_keeps_its_rows_in_files_by_default(tmp_path):
    # No store factory: SCAFFOLD's per-client control variates go to ClientStateStore files under the
    # simulation's client-state folder, not into RAM.
    sim = Simulation(_spec({"name": "scaffold"}, rounds=2), client_state_dir=tmp_path)
    sim.run()
    files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert any(name.endswith(".f32") for name in files), files
    sim.close()


@pytest.mark.slow
def test_a_scaffold_run_over_10000_clients_keeps_its_resident_memory_flat(tmp_path):
    # 10,000 clients x 7,850 control-variate floats is 314 MB if resident; a cohort of 100 new
    # clients a round would add 3.1 MB a round if the rows stayed in RAM. RSS is the engine's own
    # in-process probe (RoundResult.rss_mb), read after each round.
    rounds, cohort = 40, 100
    spec = Spec.from_dict({
        "seed": 0, "rounds": rounds,
        "data": {"name": "synthetic_images", "num_clients": 10_000, "options": {"mean_samples": 2}},
        "model": {"name": "logistic"},
        "algorithm": {"client": {"name": "scaffold"}},
        "participation": {"clients_per_round": cohort},
        "evaluation": {"every": rounds},
        "compute": {"device": "cpu"},
    })  # fmt: skip
    sim = Simulation(spec, client_state_dir=tmp_path)
    try:
        rss = [r.rss_mb for r in sim.run()]
        second_half = np.arange(rounds // 2, rounds)
        slope = np.polyfit(second_half, np.asarray(rss)[second_half], 1)[0]
        assert abs(slope) < 0.5, f"RSS changed {slope:.2f} MB per round over rounds 21-40: {[round(x) for x in rss]}"
        (store,) = sim.client.stores.values()  # the control variates, in files under the given folder
        seen = int((sim.participation > 0).sum())
        row = 4 * sim.num_params
        assert store.folder == tmp_path and seen * row <= store.disk_bytes() < 0.5 * 10_000 * row, (
            seen,
            store.disk_bytes(),
        )
        assert float(sim.client.server["c"].abs().sum()) > 0  # SCAFFOLD really ran
    finally:
        sim.close()


def test_fedprox_needs_no_store_and_runs_anywhere():
    sim = Simulation(_spec({"name": "fedprox", "options": {"mu": 0.1}}, rounds=1))
    assert sim.client is None
    assert sim.run()[0].test_accuracy is not None


@pytest.mark.parametrize(
    "sections,message",
    [
        ({"privacy": {"mechanism": "gaussian"}}, "DP"),
        ({"compute": {"device": "cpu", "isolation": "process"}}, "isolation"),
    ],
)
def test_a_stateful_client_algorithm_is_refused_where_its_state_cannot_go(sections, message):
    with pytest.raises(SpecError) as e:
        _spec({"name": "scaffold"}, **sections)
    assert e.value.field == "algorithm.client.name" and message in e.value.message


def test_feddyn_is_refused_with_a_strategy_that_never_forms_the_average():
    with pytest.raises(SpecError) as e:
        _spec({"name": "feddyn"}, algorithm={"name": "median"})
    assert e.value.field == "algorithm.client.name"
    assert _spec({"name": "scaffold"}, algorithm={"name": "median"}).algorithm.client.name == "scaffold"


def test_client_algorithm_options_are_validated_with_the_field_named():
    with pytest.raises(SpecError) as e:
        _spec({"name": "feddyn", "options": {"alpha": -1}})
    assert e.value.field == "algorithm.client.options.alpha"
    with pytest.raises(SpecError) as e:
        _spec({"name": "scaffold", "options": {"mu": 1}})
    assert e.value.field == "algorithm.client.options.mu"
    with pytest.raises(SpecError) as e:
        _spec({"name": "nope"})
    assert e.value.field == "algorithm.client.name" and "scaffold" in e.value.message


@pytest.mark.parametrize(
    "client,uplink,down,up",
    [
        # The logistic model on 8x8 digits has P = 64·10 + 10 = 650 floats; an fp32 payload is the
        # 16-byte header + 4·650 = 2,616 bytes, fp16's 16 + 2·650 = 1,316; 10 clients a round, all report.
        ({"name": "fedavg"}, "fp32", 10 * 2616, 10 * 2616),
        # SCAFFOLD sends c down beside the model and Δc_i up beside the update, both fp32.
        ({"name": "scaffold"}, "fp32", 10 * (2616 + 2616), 10 * (2616 + 2616)),
        ({"name": "scaffold"}, "fp16", 10 * (2616 + 2616), 10 * (1316 + 2616)),  # the codec compresses the update only
        ({"name": "feddyn"}, "fp32", 10 * 2616, 10 * 2616),  # h stays on the server; its returned delta is the update
        ({"name": "ditto"}, "fp32", 10 * 2616, 10 * 2616),  # personal models never leave the client
    ],
)
def test_a_client_algorithms_extras_are_counted_in_the_bytes_each_way(client, uplink, down, up):
    data = {**SHARDS["data"], "image_size": 8}
    spec = _spec(client, rounds=1, data=data, communication={"uplink": uplink})
    sim, (result,) = _run(spec)
    assert sim.num_params == 650 and result.completed == result.participants == 10
    assert (result.bytes_down, result.bytes_up) == (down, up)
    if sim.client is not None and sim.client.server:  # what goes down is an fp32 payload of this length
        (c,) = sim.client.server.values()
        assert len(make_codec("fp32", [650]).encode_one(c)) == 2616


@pytest.mark.parametrize(
    "client,extra_down,extra_up", [({"name": "fedavg"}, 0, 0), ({"name": "scaffold"}, 10 * 2616, 10 * 2616)]
)
def test_a_round_splits_its_bytes_into_the_model_with_its_codec_and_the_extras_in_fp32(client, extra_down, extra_up):
    # fp16 on both links: the model and the update are fp16 payloads (16 + 2·650 = 1,316 bytes a
    # client), SCAFFOLD's c and Δc_i fp32 ones beside them; the round says which is which.
    data = {**SHARDS["data"], "image_size": 8}
    spec = _spec(client, rounds=1, data=data, communication={"uplink": "fp16", "downlink": "fp16"})
    _, (result,) = _run(spec)
    assert (result.bytes_extra_down, result.bytes_extra_up) == (extra_down, extra_up)
    assert result.bytes_down - result.bytes_extra_down == 10 * 1316
    assert result.bytes_up - result.bytes_extra_up == 10 * 1316


def test_an_algorithm_naming_an_extra_it_does_not_have_is_refused():
    class Typo(Scaffold):
        uploads = ("c_detla",)

    with pytest.raises(ValueError, match=r"Typo: uploads names \['c_detla'\], not among \['c_delta'\]"):
        ClientRound.create(Typo(num_params=4, device="cpu", lr=0.1, options=None), {}, torch.device("cpu"))
