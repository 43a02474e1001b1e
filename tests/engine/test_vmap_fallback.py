"""A model that does not declare ``vmappable`` (a plugin's) is probed once; under ``auto`` it falls
back to sequential training with the reason in the experiment's log."""

import pytest
import torch
from torch import nn

from fedweb_engine import Spec
from fedweb_engine.components import registry
from fedweb_engine.models import build_model
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import SpecError
from fedweb_engine.training import vmap_probe
from fedweb_engine.training.client import SequentialTrainer, VectorTrainer

SMALL = {
    "seed": 1,
    "rounds": 2,
    "data": {"dataset": "digits", "num_clients": 8, "image_size": 8},
    "model": {"name": "mlp", "hidden": 16},
    "participation": {"clients_per_round": 4},
    "local": {"epochs": 1, "batch_size": 8, "lr": 0.1},
    "compute": {"device": "cpu", "client_group_size": 4, "training": "auto"},
}


class Branchy(nn.Module):
    """Data-dependent control flow: a Python ``if`` on a tensor's value, which vmap cannot batch."""

    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        h = self.fc(x.flatten(1))
        if h.sum() > 0:
            h = h * 0.5
        return h


class Normed(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc, self.norm = nn.Linear(features, classes), nn.BatchNorm1d(classes)

    def forward(self, x):
        return self.norm(self.fc(x.flatten(1)))


class Dense(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(features, 8), nn.ReLU(), nn.Linear(8, classes))

    def forward(self, x):
        return self.net(x)


PLUGIN_MODELS = {"branchy": Branchy, "normed": Normed, "dense": Dense}


@pytest.fixture
def plugin_models():
    """Register the test's models as a plugin would (vmappable left None)."""
    for name, cls in PLUGIN_MODELS.items():
        registry.model(name)(lambda shape, classes, options, cls=cls: cls(int(torch.tensor(shape).prod()), classes))
    yield
    for name in PLUGIN_MODELS:
        registry.unregister("model", name)


def spec_with(model: str, training: str = "auto") -> Spec:
    return Spec.from_dict(SMALL).replace(model={"name": model, "options": {}}, compute={"training": training})


def test_a_model_with_data_dependent_control_flow_trains_sequentially_with_the_reason_noted(plugin_models):
    sim = Simulation(spec_with("branchy"))

    assert not sim.vectorised and isinstance(sim.replicas[0].trainer, SequentialTrainer)
    assert len(sim.notes) == 1
    assert sim.notes[0].startswith("training sequentially: model branchy cannot be vectorised: RuntimeError: ")
    assert "data-dependent control flow" in sim.notes[0]
    result = sim.next_round()
    assert result.completed == 4 and result.train_loss is not None and result.train_loss == result.train_loss


def test_a_batchnorm_model_is_not_vectorised_because_of_its_buffers(plugin_models):
    sim = Simulation(spec_with("normed"))

    assert not sim.vectorised
    assert sim.notes == [
        "training sequentially: model normed cannot be vectorised: "
        "it has buffers (e.g. BatchNorm running statistics), which are not trained per client"
    ]
    assert sim.next_round().completed == 4


def test_a_vmappable_plugin_model_stays_vectorised_and_the_probe_leaves_its_weights_alone(plugin_models):
    sim = Simulation(spec_with("dense"))

    assert sim.vectorised and isinstance(sim.replicas[0].trainer, VectorTrainer)
    assert sim.notes == []
    # The weights the engine builds from the seed, untouched by the probe's trial step.
    fresh = build_model(sim.spec.model, (1, 8, 8), 10, generator=torch.Generator().manual_seed(sim.spec.seed))
    assert torch.equal(sim.global_flat, torch.cat([p.detach().reshape(-1) for p in fresh.parameters()]))
    assert sim.next_round().completed == 4


def test_vectorized_training_of_a_model_that_cannot_be_vectorised_stays_an_error(plugin_models):
    with pytest.raises(SpecError) as e:
        Simulation(spec_with("branchy", training="vectorized"))
    assert e.value.field == "compute.training"
    assert "model branchy cannot be vectorised (RuntimeError: " in e.value.message


def test_sequential_training_never_probes(plugin_models, monkeypatch):
    monkeypatch.setattr(vmap_probe, "probe", _no_probe)
    sim = Simulation(spec_with("branchy", training="sequential"))
    assert not sim.vectorised and sim.notes == []


def test_built_in_models_keep_their_vectorised_path_without_a_probe(monkeypatch):
    monkeypatch.setattr(vmap_probe, "probe", _no_probe)
    sim = Simulation(Spec.from_dict(SMALL))  # mlp: dense, declared vmappable
    assert sim.vectorised and sim.notes == []


def test_a_registration_that_says_vmappable_false_is_believed_without_a_probe(monkeypatch):
    monkeypatch.setattr(vmap_probe, "probe", _no_probe)
    registry.model("declared_no", vmappable=False)(lambda shape, classes, options: Dense(64, classes))
    try:
        assert vmap_probe.declared_vmappable(Dense(64, 10), "declared_no") is False
        assert vmap_probe.declared_vmappable(Dense(64, 10), "not_registered") is None
    finally:
        registry.unregister("model", "declared_no")


def _no_probe(*args, **kwargs):
    raise AssertionError("the probe must not run here")
