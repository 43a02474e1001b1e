import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedweb_engine import ROUND_RESULT_FIELDS, Spec
from fedweb_engine.simulation.runner import Simulation

ROOT = Path(__file__).resolve().parents[2]

SMALL = {
    "seed": 3,
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8},
    "model": {"name": "mlp", "hidden": 32},
    "participation": {"clients_per_round": 6},
    "local": {"epochs": 2, "batch_size": 8, "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4},
    "compute": {"device": "cpu", "client_group_size": 4},
}


def small(**changes) -> Spec:
    return Spec.from_dict(SMALL).replace(**changes)


def test_it_returns_every_round_result_field():
    sim = Simulation(small(rounds=1))

    result = sim.next_round().to_dict()

    assert tuple(result) == ROUND_RESULT_FIELDS
    assert result["round"] == 1 and result["participants"] == 6 and result["completed"] == 6
    assert result["test_accuracy"] is not None and result["vram_allocated_mb"] is None
    assert result["device"] == "cpu"
    assert sim.done


@pytest.mark.parametrize(
    "changes",
    [
        # momentum, weight decay, FedProx and partial stragglers on the mlp
        dict(
            algorithm={"name": "fedprox", "mu": 0.5},
            heterogeneity={"straggler_fraction": 0.5, "straggler_policy": "partial"},
        ),
        # the CNN (vmap turns its convolutions into grouped ones) on the native 8x8 digits: images
        # upscaled to 28x28 have flat plateaus, where max-pool ties are broken by the last bit of
        # each path's convolution and send the gradient elsewhere (1e-3 apart after 3 rounds on an
        # AMD EPYC, 3e-8 at 8x8); a stable step size, since large ones amplify reordering chaotically
        dict(model={"name": "cnn"}, local={"lr": 0.02, "momentum": 0.0}),
    ],
    ids=["mlp-fedprox-stragglers", "cnn"],
)
def test_it_trains_the_same_model_vectorised_and_sequentially(changes):
    vec = Simulation(small(compute={"training": "vectorized"}, **changes))
    seq = Simulation(small(compute={"training": "sequential"}, **changes))

    for _ in range(3):
        a, b = vec.next_round(), seq.next_round()
        assert a.samples == b.samples

    assert vec.vectorised and not seq.vectorised
    assert (vec.global_flat - seq.global_flat).abs().max().item() <= 1e-4
    assert a.train_loss == pytest.approx(b.train_loss, rel=1e-4)


def test_it_spreads_groups_over_devices_with_the_same_result():
    one = Simulation(small(rounds=2))
    two = Simulation(small(rounds=2), devices=[torch.device("cpu"), torch.device("cpu")])

    a, b = one.run(), two.run()

    assert len(two.replicas) == 2
    # Each device keeps its own partial sum, reduced once per round (no per-group cross-device
    # copies), so the sum's order differs from one device's: equal up to float rounding.
    assert (one.global_flat - two.global_flat).abs().max().item() <= 1e-6
    assert [r.train_loss for r in a] == pytest.approx([r.train_loss for r in b], abs=1e-6)


def test_it_counts_dropouts_and_stragglers():
    sim = Simulation(
        small(rounds=1, heterogeneity={"dropout": 0.5, "straggler_fraction": 1 / 3, "straggler_policy": "drop"})
    )

    result = sim.next_round()

    assert (result.participants, result.dropped, result.stragglers, result.completed) == (6, 5, 2, 1)
    assert result.bytes_up == sim.uplink.payload_bytes() * 1
    assert result.bytes_down == sim.downlink.payload_bytes() * 6


def test_it_survives_a_round_where_every_client_drops_out():
    sim = Simulation(small(rounds=1, heterogeneity={"dropout": 1.0}))
    before = sim.global_flat.clone()

    result = sim.next_round()

    assert result.completed == 0 and result.train_loss is None and result.bytes_up == 0
    assert torch.equal(before, sim.global_flat)


@pytest.mark.parametrize("codec", ["fp32", "fp16", "int8", "topk"])
def test_it_measures_encoded_bytes(codec):
    sim = Simulation(small(rounds=1, communication={"uplink": codec, "downlink": codec, "topk_ratio": 0.01}))
    P, tensors = sim.num_params, len(sim.layout)
    expected = {"fp32": 4 * P, "fp16": 2 * P, "int8": P + 8 * tensors, "topk": 8 * math.ceil(0.01 * P)}[codec] + 16

    result = sim.next_round()

    assert result.bytes_up == expected * result.completed
    assert result.bytes_down == expected * result.participants
    assert result.bytes_formula == 8 * P * 6
    assert result.test_accuracy is not None


def test_it_learns_with_every_server_optimizer():
    for name, lr in [("fedavgm", 0.5), ("fedadam", 0.01), ("fedyogi", 0.01), ("fedadagrad", 0.05)]:
        sim = Simulation(small(rounds=4, algorithm={"name": name, "server_lr": lr}))
        results = sim.run()
        assert results[-1].train_loss < results[0].train_loss, name


def test_it_stops_when_a_callback_says_so():
    seen = []
    sim = Simulation(small(rounds=3), callbacks=[lambda r: seen.append(r.round) or r.round == 2])

    sim.run()

    assert seen == [1, 2] and sim.round == 2


def test_it_resumes_from_a_checkpoint_exactly(tmp_path):
    spec = small(
        rounds=6, communication={"uplink": "topk", "topk_ratio": 0.05}, algorithm={"name": "fedadam", "server_lr": 0.01}
    )
    straight = Simulation(spec).run()
    first = Simulation(spec)
    first.run(3)
    first.save_checkpoint(tmp_path / "ck.safetensors")

    resumed = Simulation.from_checkpoint(tmp_path / "ck.safetensors")
    rest = resumed.run()

    assert [r.round for r in rest] == [4, 5, 6]
    for a, b in zip(straight[3:], rest, strict=True):
        assert (a.train_loss, a.test_loss, a.test_accuracy) == (b.train_loss, b.test_loss, b.test_accuracy)


def _cli(*args, cwd=ROOT):
    out = subprocess.run(
        [sys.executable, "-m", "fedweb_engine", *args], cwd=cwd, capture_output=True, text=True, check=True
    )
    return [json.loads(line) for line in out.stdout.splitlines()], out.stderr


@pytest.mark.slow
def test_it_resumes_in_a_new_process_with_identical_results(tmp_path):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({**SMALL, "rounds": 10}))
    ck = tmp_path / "ck.safetensors"

    straight, _ = _cli("run", str(spec_file), "--quiet")
    head, _ = _cli("run", str(spec_file), "--quiet", "--stop-after", "5", "--checkpoint", str(ck))
    tail, _ = _cli("run", "--resume", str(ck), "--quiet")

    assert [r["round"] for r in head + tail] == list(range(1, 11))
    keys = ("train_loss", "test_loss", "test_accuracy", "samples", "bytes_up")
    assert [{k: r[k] for k in keys} for r in straight] == [{k: r[k] for k in keys} for r in head + tail]


def test_it_rejects_vectorising_a_model_that_cannot_be():
    class NotVmappable(torch.nn.Linear):
        vmappable = False

    import fedweb_engine.simulation.runner as runner

    original = runner.build_model
    runner.build_model = lambda *a, **k: NotVmappable(64, 10)
    try:
        with pytest.raises(Exception, match="compute.training"):
            Simulation(small(compute={"training": "vectorized"}))
    finally:
        runner.build_model = original
