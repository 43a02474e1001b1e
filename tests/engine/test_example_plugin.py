"""The example plugin package (examples/fedweb-plugin-example) loads, registers and works as documented."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from fedweb_engine.algorithms import build_algorithm
from fedweb_engine.components import registry
from fedweb_engine.components.provenance import spec_provenance
from fedweb_engine.data.base import FederatedData
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import LocalSpec, Spec
from fedweb_engine.training import vmap_probe
from fedweb_engine.training.client import VectorTrainer, sgd_update_
from fedweb_engine.training.evaluation import evaluate
from fedweb_engine.training.plan import plan_groups, sample_cohort
from tests.live import EXAMPLE_COMPONENTS, EXAMPLE_DIR, EXAMPLE_PLUGIN, ROOT

EXAMPLE, PACKAGE, COMPONENTS = EXAMPLE_DIR, EXAMPLE_PLUGIN, EXAMPLE_COMPONENTS


@pytest.fixture
def example(example_plugin):
    """The example package's module, loaded as a server loads it (``tests/conftest.py``)."""
    return sys.modules[example_plugin]


def _options(kind, name, **values):
    return registry.get(kind, name).options(**values)


def _stripes(seed, **values):
    component = registry.get("dataset", "stripes")
    return component.factory(_options("dataset", "stripes", **values), np.random.default_rng(seed))


def test_the_three_components_register_with_their_options(example):
    assert example.__name__ == PACKAGE
    for kind, name in COMPONENTS:
        assert not registry.get(kind, name).builtin and registry.get(kind, name).plugin == PACKAGE
    fields = {f.name: f.metadata for f in dataclasses.fields(registry.get("model", "resnet_small").options)}
    assert fields["width"]["min"] == 4 and fields["blocks"]["max"] == 8
    assert registry.get("model", "resnet_small").traits["vmappable"] is True
    stripes = registry.get("dataset", "stripes")
    assert stripes.traits["natural"] and stripes.traits["describe"] is not None
    assert {f.name for f in dataclasses.fields(stripes.options)} >= {"num_samples", "noise", "num_classes"}
    assert _options("strategy", "fedavg_clipped").max_norm == 1.0
    assert "residual CNN" in registry.get("model", "resnet_small").help


def test_the_model_gives_logits_per_class_and_learns_through_the_vectorised_trainer(example):
    torch.manual_seed(0)
    pool = _stripes(0, num_samples=256, side=12, noise=0.1)
    model = registry.get("model", "resnet_small").factory((1, 12, 12), 4, _options("model", "resnet_small", width=8))
    assert model(pool.x_train[:5]).shape == (5, 4)
    cfg = LocalSpec(lr=0.05)
    assert vmap_probe.probe(model, pool.x_train, pool.y_train, torch.device("cpu")) is None

    offsets = torch.tensor([0, 128, 256])
    data = FederatedData(pool.x_train, pool.y_train, offsets, pool.x_train, pool.y_train, 4, (1, 12, 12))
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    trainer = VectorTrainer(model, 2, cfg, torch.device("cpu"))
    before, _ = _loss(model, flat, data)
    rng = np.random.default_rng(0)
    for _ in range(6):  # FedAvg by hand: both clients, one local epoch each
        cohort = sample_cohort(
            rng, np.array([128, 128]), 2, epochs=1, batch_size=16, straggler_fraction=0.0,
            straggler_policy="drop", dropout=0.0,
        )  # fmt: skip
        for plan in plan_groups(rng, cohort, offsets.numpy(), group_size=2, epochs=1, batch_size=16):
            out = trainer.train(flat, plan, data)
            flat = flat + (out.delta * plan.weights[:, None]).sum(0) / plan.weights.sum()
    after, _ = _loss(model, flat, data)
    assert after < before


def _loss(model, flat, data):
    sizes = [p.numel() for p in model.parameters()]
    with torch.no_grad():
        for p, part in zip(model.parameters(), flat.split(sizes), strict=True):
            p.copy_(part.view(p.shape))
    return evaluate(model, data.x_train, data.y_train, batch_size=64, device=torch.device("cpu"))


def test_the_dataset_is_a_function_of_its_options_and_the_seed(example):
    a, b, c = _stripes(7, num_samples=100), _stripes(7, num_samples=100), _stripes(8, num_samples=100)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_train, b.y_train)
    assert not torch.equal(a.x_train, c.x_train)
    assert a.x_test is None  # the engine holds out data.test_fraction
    assert a.x_train.shape == (100, 1, 16, 16) and 0.0 <= float(a.x_train.min()) <= float(a.x_train.max()) <= 1.0
    assert list(np.diff(a.writer_ids) >= 0) == [True] * 99 and len(a.writer_names) == 10
    shape = registry.get("dataset", "stripes").traits["describe"](_options("dataset", "stripes", num_samples=100))
    assert shape.input_shape == a.input_shape and shape.train_samples == 100 and shape.num_classes == a.num_classes


def test_the_clipped_strategy_scales_large_updates_to_max_norm_and_passes_small_ones(example):
    make = registry.get("strategy", "fedavg_clipped").factory
    strategy = make(num_params=3, device="cpu", lr=0.5, options=_options("strategy", "fedavg_clipped", max_norm=1.0))
    w = torch.ones(3)
    strategy.step(w, torch.tensor([3.0, 4.0, 0.0]))  # norm 5: scaled by 1/5, then by lr 0.5
    assert torch.allclose(w, torch.tensor([1.3, 1.4, 1.0]))
    strategy.step(w, torch.tensor([0.3, 0.4, 0.0]))  # norm 0.5 < 1: applied as is, times lr
    assert torch.allclose(w, torch.tensor([1.45, 1.6, 1.0]))
    assert strategy.state_dict() == {}  # no buffers to checkpoint


def test_the_client_algorithm_clips_each_clients_step_to_max_norm(example):
    options = _options("algorithm", "clipped_steps", max_norm=1.0)
    algorithm = build_algorithm("clipped_steps", options, num_params=3, device="cpu", lr=0.5)
    assert algorithm.corrects and algorithm.trivial  # a per-step rule, no state: runs on every path
    w, start = torch.zeros(2, 3), torch.zeros(3)
    g = torch.tensor([[3.0, 4.0, 0.0], [0.3, 0.4, 0.0]])  # norms 5 and 0.5
    sgd_update_(w, g, start, None, torch.ones(2), LocalSpec(lr=0.5), lambda g, w, s: algorithm.correct(g, w, s, None))
    assert torch.allclose(w, torch.tensor([[-0.3, -0.4, 0.0], [-0.15, -0.2, 0.0]]))


def test_the_client_algorithm_runs_vectorised_in_a_simulation(example):
    spec = Spec.from_dict(
        {
            "rounds": 2,
            "data": {"name": "digits", "num_clients": 6},
            "model": {"name": "logistic"},
            "algorithm": {"name": "fedadam", "client": {"name": "clipped_steps", "options": {"max_norm": 0.5}}},
            "participation": {"clients_per_round": 4},
            "compute": {"device": "cpu", "training": "vectorized"},
        }
    )
    sim = Simulation(spec)
    assert sim.vectorised and sim.replicas[0].trainer.algorithm.options.max_norm == 0.5
    assert all(r.test_accuracy is not None for r in sim.run())
    assert [p["name"] for p in spec_provenance(spec)] == ["clipped_steps"]


def test_installed_plugins_reports_the_package_with_its_source_hash(example):
    [info] = [p for p in registry.installed_plugins() if p["name"] == PACKAGE]
    assert info["components"] == [
        "algorithm:clipped_steps",
        "dataset:stripes",
        "model:resnet_small",
        "strategy:fedavg_clipped",
    ]
    assert len(info["hash"]) == 16 and info["hash"] == registry.source_hash(PACKAGE)
    assert info["version"] is None  # on sys.path, not pip-installed: no distribution to ask
    used = registry.spec_plugins({"model": "resnet_small", "strategy": "fedavg_clipped"})
    assert [(p["kind"], p["name"], p["hash"]) for p in used] == [
        ("model", "resnet_small", info["hash"]),
        ("strategy", "fedavg_clipped", info["hash"]),
    ]


def test_the_package_declares_the_entry_point_fedweb_discovers():
    import tomllib

    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    assert project["name"] == "fedweb-plugin-example" and project["version"] == "0.1.0"
    assert project["entry-points"]["fedweb.plugins"] == {"example": PACKAGE}


def test_the_engine_cli_runs_a_spec_naming_the_plugin_components(tmp_path):
    spec = {
        "seed": 1,
        "rounds": 2,
        "model": {"name": "resnet_small", "options": {"width": 8, "blocks": 1}},
        "data": {
            "name": "stripes",
            "options": {"num_samples": 400, "side": 12},
            "num_clients": 4,
            "partition": "natural",
        },
        "algorithm": {
            "name": "fedavg_clipped",
            "options": {"max_norm": 5.0},
            "client": {"name": "clipped_steps", "options": {"max_norm": 2.0}},
        },
        "participation": {"clients_per_round": 4},
        "local": {"epochs": 1, "batch_size": 16, "lr": 0.05},
        "compute": {"device": "cpu"},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "FEDWEB_PLUGINS": PACKAGE, "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "fedweb_engine", "run", str(tmp_path / "spec.json"), "--quiet"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rounds = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["round"] for r in rounds] == [1, 2] and all(r["completed"] == 4 for r in rounds)
    assert "training sequentially" not in done.stderr
