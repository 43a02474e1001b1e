"""Probes: on a CPU host the fields exist with the right types and the device fields are None."""

import sys
import types

import torch

from workers.engine import probes

FIELDS = ["rss_mb", "threads", "vram_allocated_mb", "vram_reserved_mb", "vram_peak_mb", "nvml_used_mb", "nvml_total_mb"]


def test_it_reports_host_memory_and_threads_on_cpu():
    result = probes.probe(torch.device("cpu"))

    assert sorted(result) == sorted(FIELDS)
    assert isinstance(result["rss_mb"], float) and result["rss_mb"] > 0
    assert isinstance(result["threads"], int) and result["threads"] >= 1
    assert all(result[name] is None for name in FIELDS[2:])


def test_it_accepts_a_device_name_and_resets_peaks_on_cpu():
    probes.reset_peak("cpu")

    assert probes.probe("cpu")["vram_peak_mb"] is None


def test_it_tries_nvml_once_and_swallows_its_failure(monkeypatch):
    # Prepare: a pynvml whose init fails as it does without an NVIDIA driver.
    calls = []

    def failing_init():
        calls.append(1)
        raise RuntimeError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", types.SimpleNamespace(nvmlInit=failing_init))
    monkeypatch.setattr(probes, "_nvml", None)

    # Execute
    first, second = probes._nvml_memory(0), probes._nvml_memory(0)

    # Assert
    assert first == second == (None, None)
    assert calls == [1]
