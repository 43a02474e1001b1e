"""The CUDA code paths that a CPU can exercise: data kept on the host while training runs on
another device (``meta`` stands in for the GPU: it has no data, so any index or tensor on the
wrong device fails as CUDA would), the fp16 loss scale kept on the device, the device set-up,
the VRAM figures summed over devices, and the trainers rebuilt smaller after an OOM."""

import copy
import gc
import weakref

import pytest
import torch

from fedweb_engine import Spec
from fedweb_engine.data.base import gather
from fedweb_engine.probes import memory as probes
from fedweb_engine.simulation import runner
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import LocalSpec, SpecError
from fedweb_engine.training.client import LossScaler, SequentialTrainer, VectorTrainer
from fedweb_engine.training.devices import prepare
from fedweb_engine.training.plan import plan_groups
from tests.engine.test_runner import SMALL

META = torch.device("meta")


@pytest.fixture(scope="module")
def sim():
    return Simulation(Spec.from_dict(SMALL))


@pytest.mark.parametrize("trainer", [VectorTrainer, SequentialTrainer])
def test_it_trains_on_a_device_from_data_kept_on_the_host(sim, trainer):
    # Prepare: the data stays on the host (the pinned fallback); the trainer is on another device.
    data = sim.replicas[0].data
    cohort = sim.sample_cohort(copy.deepcopy(sim.rng))
    spec = sim.spec
    plans = plan_groups(
        copy.deepcopy(sim.rng), cohort, sim.offsets, group_size=8, epochs=spec.local.epochs,
        batch_size=spec.local.batch_size,
    )  # fmt: skip
    t = trainer(copy.deepcopy(sim.model).to(META), 8, LocalSpec(lr=0.1), META)

    # Execute: host indices gather host rows, and only the batch goes to the device.
    out = t.train(sim.global_flat.to(META), plans[0], data)

    # Assert
    assert data.device.type == "cpu"
    assert out.delta.device == META and out.delta.shape == (plans[0].idx.shape[0], sim.num_params)


def test_the_gather_refuses_indices_on_another_device_than_the_data():
    x = torch.arange(12.0).view(6, 2)
    with pytest.raises(ValueError, match="indices are on meta but the data is on cpu"):
        gather(x, torch.tensor([0, 1]).to(META), META)
    assert gather(x, torch.tensor([4, 1]), META).device == META
    assert torch.equal(gather(x, torch.tensor([4, 1]), torch.device("cpu")), x[[4, 1]])


def test_pinning_keeps_host_data_on_the_host_without_a_gpu(sim):
    pinned = sim.replicas[0].data.to("cpu", pin=True)
    assert pinned.device.type == "cpu" and pinned.x_train.shape == sim.replicas[0].data.x_train.shape


def test_a_smaller_group_drops_the_old_trainers_first_and_keeps_the_data_in_place(monkeypatch):
    sim = Simulation(Spec.from_dict(SMALL).replace(compute={"client_group_size": 8}))
    old = weakref.ref(sim.replicas[0].trainer)
    data = sim.replicas[0].data
    alive_when_building = []
    original = runner.build_trainer

    def build_trainer(*args, **kwargs):
        gc.collect()
        alive_when_building.append(old() is not None)
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "build_trainer", build_trainer)
    sim.set_client_group_size(4)

    assert alive_when_building == [False]
    assert sim.replicas[0].trainer.group_size == 4 and sim.replicas[0].data is data


def _old_scaler(steps_finite: list[bool], scale: float = 2.0**12) -> list[float]:
    """The previous, host-side rule: halve on overflow, double after 200 clean steps."""
    clean, out = 0, []
    for ok in steps_finite:
        if ok:
            clean += 1
            if clean >= 200:
                scale, clean = scale * 2, 0
        else:
            scale, clean = scale / 2, 0
        out.append(scale)
    return out


def test_the_device_loss_scale_follows_the_host_rule_and_skips_overflowing_clients():
    scaler = LossScaler(True)
    pattern = [True] * 199 + [False] + [True] * 201 + [False, False] + [True] * 250
    scales = []
    for ok in pattern:
        g = torch.ones(3, 4) * scaler.scale
        if not ok:
            g[1, 2] = float("inf")  # a fake overflow in client 1
        active = scaler.unscale_and_check(g, torch.ones(3))
        assert torch.equal(active, torch.tensor([1.0, 0.0 if not ok else 1.0, 1.0]))
        assert torch.equal(g[0], torch.ones(4)) and torch.isfinite(g).all()
        scales.append(scaler.scale)
    assert scales == _old_scaler(pattern)
    assert isinstance(scaler.factor, torch.Tensor) and LossScaler(False).factor == 1.0


def test_prepare_sets_tf32_for_cuda_and_refuses_bf16_below_ampere():
    before = torch.get_float32_matmul_precision()
    gpu = [torch.device("cuda", 0)]
    try:
        prepare([torch.device("cpu")], "bf16")
        assert torch.get_float32_matmul_precision() == before  # a CPU run is left alone
        prepare(gpu, "bf16", capability=lambda d: (8, 0))
        assert torch.get_float32_matmul_precision() == "high"
        with pytest.raises(SpecError, match=r"compute\.precision.*cuda:0 has compute capability 7\.0"):
            prepare(gpu, "bf16", capability=lambda d: (7, 0))
        prepare(gpu, "fp16", capability=lambda d: (7, 0))  # fp16 runs on Volta
    finally:
        torch.set_float32_matmul_precision(before)


def _reading(allocated, reserved, peak, rss=100.0):
    return {"rss_mb": rss, "threads": 3, "vram_allocated_mb": allocated, "vram_reserved_mb": reserved,
            "vram_peak_mb": peak, "nvml_used_mb": None, "nvml_total_mb": None}  # fmt: skip


def test_vram_is_summed_over_the_devices_and_the_isolated_child():
    gpus = [_reading(100.0, 300.0, 400.0), _reading(50.0, 200.0, 250.0, rss=999.0)]

    out = probes.combine(gpus, child_vram_peak_mb=1000.0)

    assert (out["vram_allocated_mb"], out["vram_reserved_mb"], out["vram_peak_mb"]) == (150.0, 500.0, 1650.0)
    assert out["rss_mb"] == 100.0  # host figures are the process's own, read once
    assert probes.combine([_reading(None, None, None)])["vram_peak_mb"] is None  # a CPU round
    assert probes.combine([_reading(None, None, None)], child_vram_peak_mb=80.0)["vram_peak_mb"] == 80.0
    assert probes.probe_devices([torch.device("cpu"), torch.device("cpu")])["vram_peak_mb"] is None
