"""The GPUs a worker reports: CUDA_VISIBLE_DEVICES read as CUDA reads it (indices, UUIDs, MIG
entries), mapped to NVML's devices by UUID, and NVML initialised once per process."""

import sys
import types
from types import SimpleNamespace

import pytest

from fedweb_engine.probes import memory as probes
from workers import gpus


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (None, None),
        ("", []),
        ("1,3", [1, 3]),
        (" 0 , 2 ", [0, 2]),
        ("GPU-8a3c11f2-0000-1111-2222-333344445555,1", ["GPU-8a3c11f2-0000-1111-2222-333344445555", 1]),
        ("GPU-8a3c", ["GPU-8a3c"]),  # a unique prefix names a GPU too
        ("MIG-5c9e1f0e-aaaa-bbbb-cccc-ddddeeeeffff", ["MIG-5c9e1f0e-aaaa-bbbb-cccc-ddddeeeeffff"]),
        ("MIG-GPU-8a3c11f2-0000-1111-2222-333344445555/1/0", ["MIG-GPU-8a3c11f2-0000-1111-2222-333344445555/1/0"]),
        ("0,-1,2", [0]),  # CUDA stops at the first invalid entry
        ("-1", []),
        ("nvidia0,1", []),
    ],
)
def test_it_parses_cuda_visible_devices_as_cuda_does(value, parsed):
    assert gpus.parse_visible(value) == parsed


class FakeNVML:
    """Three GPUs in PCI order and one MIG instance; counts its initialisations."""

    UUIDS = ["GPU-aaaa-0", "GPU-bbbb-1", "GPU-cccc-2"]

    def __init__(self):
        self.inits = 0

    def nvmlInit(self):
        self.inits += 1

    def nvmlDeviceGetCount(self):
        return len(self.UUIDS)

    def nvmlDeviceGetHandleByIndex(self, i):
        return ("gpu", i)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid.startswith("MIG-"):
            return ("mig", uuid)
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceGetUUID(self, handle):
        return handle[1] if handle[0] == "mig" else self.UUIDS[handle[1]]

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA A100 MIG 1g.10gb" if handle[0] == "mig" else f"GPU {handle[1]}".encode()

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=10 * 2**20 if handle[0] == "mig" else 80 * 2**20, used=2**20)


def _names(lib, entries):
    return [lib.nvmlDeviceGetUUID(h) for h in gpus.visible_handles(lib, entries)]


def test_it_maps_indices_uuids_and_mig_entries_to_nvml_devices():
    lib = FakeNVML()
    assert _names(lib, None) == FakeNVML.UUIDS
    assert _names(lib, [2, 0]) == ["GPU-cccc-2", "GPU-aaaa-0"]
    assert _names(lib, ["GPU-bbbb", "GPU-aaaa-0"]) == ["GPU-bbbb-1", "GPU-aaaa-0"]
    assert _names(lib, ["MIG-xyz"]) == ["MIG-xyz"]
    assert _names(lib, [1, 7, 0]) == ["GPU-bbbb-1"]  # an index past the GPUs ends the list, as in CUDA
    assert _names(lib, ["GPU-", 0]) == []  # an ambiguous prefix too


def test_it_initialises_nvml_once_for_every_heartbeat_and_scrape(monkeypatch):
    lib = FakeNVML()
    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(**{
        name: getattr(lib, name) for name in dir(lib) if name.startswith("nvml")
    }))  # fmt: skip
    monkeypatch.setattr(probes, "_nvml", None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-cccc,MIG-abc")

    first, second = gpus.gpu_devices(), gpus.gpu_devices()

    assert lib.inits == 1
    assert first == second
    assert [(d["index"], d["uuid"], d["total_mb"]) for d in first] == [(0, "GPU-cccc-2", 80), (1, "MIG-abc", 10)]
    assert first[1]["name"] == "NVIDIA A100 MIG 1g.10gb"
