"""The capacity estimate and the server's limits (issue 11, item 5)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fedweb_engine.data import build_data
from fedweb_engine.estimates.capacity import Limits, check_capacity, estimate
from fedweb_engine.models import build_model, count_params
from fedweb_engine.spec.presets import PRESETS, preset_specs
from fedweb_engine.spec.schema import Spec, SpecError

ROOT = Path(__file__).resolve().parents[2]
# A round of each, small enough for CI; the estimate must be within a factor of 2 of what it takes.
REAL_RUNS = {
    "mlp-vectorised": {
        "data": {"num_clients": 20},
        "model": {"name": "mlp", "hidden": 512},
        "participation": {"clients_per_round": 16},
        "local": {"batch_size": 32, "momentum": 0.9},
        "compute": {"client_group_size": 16},
    },
    "cnn-sequential": {
        "data": {"num_clients": 20},
        "model": {"name": "cnn"},
        "participation": {"clients_per_round": 10},
        "local": {"batch_size": 64},
        "compute": {"client_group_size": 10},
    },
    "lm14m": {
        "data": {"dataset": "tokens", "num_clients": 2, "partition": "natural", "mean_samples": 4, "seq_len": 32},
        "model": {"name": "lm14m"},
        "participation": {"clients_per_round": 2},
        "local": {"batch_size": 4},
        "evaluation": {"batch_size": 8},
    },
}
# Peak resident memory of one round, above what the process held before the Simulation existed.
MEASURE = """
import gc, json, sys
import torch
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec

def kb(field):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(field))

spec = Spec.from_dict(json.loads(sys.argv[1]))
torch.zeros(1000, 1000).sum()
gc.collect()
base = kb("VmRSS")
open("/proc/self/clear_refs", "w").write("5")  # reset the peak (VmHWM) to the current RSS
sim = Simulation(spec)
sim.next_round()
print(json.dumps({"round_bytes": kb("VmHWM") - base - sim.replicas[0].data.nbytes()}))
"""


def _spec(raw: dict) -> Spec:
    return Spec.from_dict({"rounds": 1, **raw, "compute": {"device": "cpu", **raw.get("compute", {})}})


@pytest.mark.parametrize("name", list(REAL_RUNS))
def test_it_counts_parameters_exactly(name):
    spec = _spec(REAL_RUNS[name])
    data = build_data(spec.data, spec.seed)

    real = count_params(build_model(spec.model, data.input_shape, data.num_classes))

    assert estimate(spec, "cpu").params == real


@pytest.mark.parametrize(
    "data",
    [
        {"dataset": "digits", "image_size": 28},
        {"dataset": "synthetic", "num_clients": 200},
        {"dataset": "synthetic_images", "num_clients": 200, "mean_samples": 50},
        {"dataset": "tokens", "num_clients": 200, "mean_samples": 10, "seq_len": 16, "partition": "natural"},
    ],
    ids=lambda d: d["dataset"],
)
def test_it_estimates_the_dataset_from_the_spec_alone(data):
    spec = Spec.from_dict({"data": data, "model": {"name": "lm14m" if data["dataset"] == "tokens" else "mlp"}})

    real = build_data(spec.data, spec.seed).nbytes()

    assert real / 1.25 <= estimate(spec, "cpu").dataset_bytes <= real * 1.25


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc to measure peak memory")
@pytest.mark.parametrize("name", list(REAL_RUNS))
def test_it_estimates_round_memory_within_a_factor_of_two(name):
    spec = _spec(REAL_RUNS[name])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, spec.to_json()], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )

    assert proc.returncode == 0, proc.stderr
    measured = json.loads(proc.stdout)["round_bytes"]
    estimated = estimate(spec, "cpu").round_bytes
    print(f"{name}: estimated {estimated / 1e6:.0f} MB, measured {measured / 1e6:.0f} MB")
    assert measured / 2 <= estimated <= measured * 2


@pytest.mark.parametrize("name", list(PRESETS))
@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_it_accepts_every_preset_under_the_default_limits(name, kind):
    for spec in preset_specs(name):
        assert check_capacity(spec, Limits(), kind).params > 0


def test_it_refuses_a_huge_model_naming_its_size_field_the_estimate_and_the_limit():
    spec = Spec.from_dict({"model": {"name": "mlp", "hidden": 65536}})

    with pytest.raises(SpecError) as err:
        check_capacity(spec, Limits(max_params=50_000_000), "cpu")

    assert err.value.field == "model.options.hidden"
    assert str(err.value) == (
        "model.options.hidden is too large: the model would have 4,347,133,962 parameters (17.4 GB); "
        "this server allows at most 50,000,000 (FEDWEB_MAX_PARAMS)"
    )


def test_it_refuses_a_round_that_needs_more_memory_than_the_device_allows():
    spec = Spec.from_dict(
        {
            "data": {"dataset": "tokens", "num_clients": 1000, "partition": "natural"},
            "model": {"name": "lm14m"},
            "participation": {"clients_per_round": 64},
            "evaluation": {"batch_size": 64},
        }
    )

    with pytest.raises(SpecError) as err:
        check_capacity(spec, Limits(max_round_memory_bytes_gpu=16 * 10**9), "gpu")

    assert err.value.field == "compute.client_group_size"
    message = str(err.value)
    assert "would need about 103 GB of a GPU's memory" in message
    assert "for 64 clients × batch 20" in message
    assert message.endswith("this server allows at most 16.0 GB (FEDWEB_MAX_ROUND_MEMORY_GPU)")
    # The same spec trained one client at a time on a CPU needs far less.
    assert check_capacity(spec, Limits(), "cpu").round_bytes < 16 * 10**9


@pytest.mark.parametrize(
    "raw, limits, field, limit",
    [
        ({"rounds": 200_000}, Limits(), "rounds", "100,000 rounds (FEDWEB_MAX_ROUNDS)"),
        ({"data": {"num_clients": 600_000}}, Limits(), "data.num_clients", "500,000 clients (FEDWEB_MAX_CLIENTS)"),
        (
            {"data": {"dataset": "synthetic_images", "num_clients": 100_000, "mean_samples": 1000}},
            Limits(),
            "data.options.mean_samples",
            "16.0 GB (FEDWEB_MAX_DATASET)",
        ),
        (
            {"data": {"dataset": "synthetic_images", "num_clients": 400_000}},
            Limits(max_dataset_bytes=10**9),
            "data.num_clients",
            "1.0 GB (FEDWEB_MAX_DATASET)",
        ),
        (
            {"data": {"num_clients": 1000}, "communication": {"uplink": "topk"}},
            Limits(max_round_memory_bytes_cpu=2 * 10**9),
            "communication.error_feedback",  # a residual row per client: 1000 × 4.8 MB
            "2.0 GB (FEDWEB_MAX_ROUND_MEMORY_CPU)",
        ),
        (
            {"model": {"name": "vgg"}, "evaluation": {"batch_size": 65536}, "compute": {"device": "cpu"}},
            Limits(),
            "evaluation.batch_size",
            "32.0 GB (FEDWEB_MAX_ROUND_MEMORY_CPU)",
        ),
    ],
    ids=["rounds", "clients", "dataset-samples", "dataset-clients", "residuals", "evaluation"],
)
def test_it_names_the_field_most_responsible_and_the_limit(raw, limits, field, limit):
    with pytest.raises(SpecError) as err:
        check_capacity(Spec.from_dict(raw), limits, "cpu")

    assert err.value.field == field
    assert str(err.value).endswith(f"this server allows at most {limit}")


class _Branchy(torch.nn.Module):
    def __init__(self, classes: int, fail: bool = False):
        super().__init__()
        self.fc = torch.nn.Linear(64, classes)
        self.fail = fail

    def forward(self, x):
        if self.fail:
            raise ValueError("expects 3 channels")
        h = self.fc(x.flatten(1))
        return h * 0.5 if h.sum() > 0 else h  # data-dependent: no meta kernel can answer this


@pytest.fixture
def plugin_models():
    from fedweb_engine.components import registry

    registry.model("cap_branchy")(lambda shape, classes, options: _Branchy(classes))
    registry.model("cap_broken")(lambda shape, classes, options: _Branchy(classes, fail=True))
    yield
    registry.unregister("model", "cap_branchy")
    registry.unregister("model", "cap_broken")


def test_a_plugin_model_the_meta_device_cannot_run_is_measured_on_the_cpu(plugin_models):
    spec = Spec.from_dict({"data": {"dataset": "digits", "image_size": 8}, "model": {"name": "cap_branchy"}})
    est = estimate(spec, "cpu")
    assert est.params == 64 * 10 + 10 and est.activation_bytes > 0


def test_a_plugin_model_that_fails_on_the_datasets_inputs_is_a_model_name_error(plugin_models):
    spec = Spec.from_dict({"data": {"dataset": "digits", "image_size": 8}, "model": {"name": "cap_broken"}})
    with pytest.raises(SpecError, match=r"^model.name cap_broken fails on inputs \(1, 8, 8\): ValueError: expects 3"):
        estimate(spec, "cpu")


def test_a_plugin_dataset_whose_loader_fails_is_a_data_name_error():
    from fedweb_engine.components import registry

    def load(options, rng):
        raise OSError("disk quota exceeded")

    registry.dataset("cap_failing")(load)
    try:
        spec = Spec.from_dict({"data": {"name": "cap_failing"}, "model": {"name": "mlp"}})
        with pytest.raises(SpecError, match="^data.name cap_failing could not be read: OSError: disk quota exceeded"):
            estimate(spec, "cpu")
    finally:
        registry.unregister("dataset", "cap_failing")
