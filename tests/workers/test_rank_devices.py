"""Which devices a worker's own ranks run on, and how many ranks a spec asks for: FEDWEB_WORKER_DEVICES,
``cuda:all`` as one rank per GPU, the CPU when the spec asks for it (GPUs are counted, not used)."""

from types import SimpleNamespace

import pytest
import torch

from fedweb_engine.distributed.local import ranks_for
from fedweb_engine.spec.schema import Spec
from tests.conftest import TINY_SPEC
from workers import ranks


def _spec(device: str, n: int = 1) -> Spec:
    return Spec.from_dict({**TINY_SPEC, "compute": {"device": device, "ranks": n}})


@pytest.fixture
def four_gpus(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)


def test_a_worker_s_own_devices_carry_its_ranks_on_the_cpu_when_the_spec_asks(settings):
    settings.FEDWEB_WORKER_DEVICES = ["cuda:2", "cuda:3"]
    assert ranks.local_devices(_spec("auto", 2)) == [torch.device("cuda:2"), torch.device("cuda:3")]
    assert ranks.local_devices(_spec("cpu", 2)) == [torch.device("cpu")] * 2
    assert ranks.rank0_device(_spec("auto")) == "cuda:2"  # the worker's device, for a one-rank run too


def test_cuda_all_is_one_rank_per_gpu_in_a_worker_and_on_the_command_line(settings, four_gpus):
    settings.FEDWEB_WORKER_DEVICES = []
    spec = _spec("cuda:all")
    assert ranks.local_devices(spec) == [torch.device(f"cuda:{k}") for k in range(4)]
    assert ranks.wanted_ranks(SimpleNamespace(spec=spec)) == 4 and ranks_for(spec) == 4
    assert ranks.wanted_ranks(SimpleNamespace(spec=_spec("cuda:all", 2))) == 2  # an explicit count wins
    assert ranks_for(_spec("auto", 0)) == 4 and ranks_for(_spec("cpu", 0)) == 1  # auto: a rank per GPU


def test_auto_asks_for_as_many_ranks_as_are_free_up_to_the_setting(settings):
    settings.FEDWEB_WORKER_DEVICES, settings.FEDWEB_MAX_RANKS = [], 5
    assert ranks.wanted_ranks(SimpleNamespace(spec=_spec("cpu", 0))) == 5
    assert ranks.local_devices(_spec("cpu", 0)) == []  # no devices of its own: a gang, if any worker is idle
