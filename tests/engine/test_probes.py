"""Probes: on a CPU host the fields exist with the right types and the device fields are None."""

import os
import sys
import types

import psutil
import torch

from fedweb_engine.probes import memory as probes

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


def test_a_forked_child_reports_its_own_memory_not_its_parents():
    # The Celery parent imports this module (the heartbeat reads NVML through it) before forking.
    probes.probe("cpu")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: grow by 64 MB, then report what the probe and psutil see
        kept = bytearray(os.urandom(64 * 2**20))
        own = psutil.Process(os.getpid()).memory_info().rss / 2**20
        os.write(write, f"{probes.probe('cpu')['rss_mb']} {own} {len(kept)}".encode())
        os._exit(0)
    os.close(write)
    seen, own, _ = (float(v) for v in os.read(read, 128).split())
    os.waitpid(pid, 0)
    assert abs(seen - own) < 8, f"the probe saw {seen:.0f} MB, the child has {own:.0f} MB"
