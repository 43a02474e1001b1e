"""Memory and thread probes: what each round reports, so a leak shows up at once on the charts.

Host figures come from psutil; device figures from PyTorch's CUDA allocator and, when the NVIDIA
driver is there, from NVML (which also sees memory held outside PyTorch, e.g. by other
processes). Every NVML failure is swallowed: a CPU-only host simply reports None.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import psutil
import torch

_MB = 1024 * 1024
_processes: dict[int, psutil.Process] = {}  # by pid: a forked child must not read its parent
_nvml: Any = None  # the pynvml module once initialised, False when unavailable, None before trying


def probe(device: torch.device | str) -> dict[str, float | int | None]:
    """Process RSS and threads, plus allocator and NVML memory of ``device`` (None on CPU)."""
    device = torch.device(device)
    out: dict[str, float | int | None] = {
        "rss_mb": _this_process().memory_info().rss / _MB,
        "threads": _this_process().num_threads(),
        "vram_allocated_mb": None,
        "vram_reserved_mb": None,
        "vram_peak_mb": None,
        "nvml_used_mb": None,
        "nvml_total_mb": None,
    }
    if device.type == "cuda" and torch.cuda.is_available():
        index = _cuda_index(device)
        out["vram_allocated_mb"] = torch.cuda.memory_allocated(index) / _MB
        out["vram_reserved_mb"] = torch.cuda.memory_reserved(index) / _MB
        # The allocator's peak reserve, not its peak allocation: memory it keeps cached is memory
        # no other job on this GPU can have, and pack() places jobs by this figure.
        out["vram_peak_mb"] = torch.cuda.max_memory_reserved(index) / _MB
        used, total = _nvml_memory(index)
        out["nvml_used_mb"], out["nvml_total_mb"] = used, total
    return out


def probe_devices(devices: Sequence[torch.device], child_vram_peak_mb: float | None = None) -> dict:
    """:func:`probe` for a round that used ``devices``: VRAM summed over all of them (``cuda:all``
    uses every GPU, not only the first), plus what an isolated child reserved (its own allocator,
    in its own process, which the parent's allocator never sees)."""
    unique = list(dict.fromkeys(torch.device(d) for d in devices))
    return combine([probe(d) for d in unique], child_vram_peak_mb)


def combine(readings: Sequence[dict], child_vram_peak_mb: float | None = None) -> dict:
    """One round's memory figures from per-device ``readings`` (host figures from the first).

    The peaks are summed, not maxed: each device's peak is memory that device had to hold, and
    the child's peak was held while the parent's buffers were (an upper bound, which is what
    packing needs).
    """
    out = dict(readings[0])
    gpus = [r for r in readings if r["vram_allocated_mb"] is not None]
    if not gpus and child_vram_peak_mb is None:
        return out
    for key in ("vram_allocated_mb", "vram_reserved_mb", "vram_peak_mb"):
        out[key] = sum(r[key] for r in gpus)
    out["vram_peak_mb"] += child_vram_peak_mb or 0.0
    return out


def cuda_peak_mb(devices: Sequence[torch.device]) -> float | None:
    """The peak allocator reserve summed over ``devices``' GPUs; None without a GPU among them."""
    cuda = list(dict.fromkeys(d for d in devices if d.type == "cuda"))
    if not cuda or not torch.cuda.is_available():
        return None
    return sum(torch.cuda.max_memory_reserved(_cuda_index(d)) for d in cuda) / _MB


def _this_process() -> psutil.Process:
    # Not one Process made at import: this module is imported in the Celery parent (the heartbeat
    # reads NVML through it), and a pool child forked from it would report the parent's memory.
    pid = os.getpid()
    if pid not in _processes:
        _processes.clear()
        _processes[pid] = psutil.Process(pid)
    return _processes[pid]


def reset_peak(device: torch.device | str) -> None:
    """Start a new peak-memory window for ``device`` (e.g. each round); a no-op on CPU."""
    device = torch.device(device)
    if device.type == "cuda" and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats(_cuda_index(device))


def _cuda_index(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _nvml_memory(cuda_index: int) -> tuple[float | None, float | None]:
    """(used, total) MB of a CUDA device as NVML sees it, or (None, None)."""
    nvml = _nvml_module()
    if not nvml:
        return None, None
    try:
        info = nvml.nvmlDeviceGetMemoryInfo(_nvml_handle(nvml, cuda_index))
        return info.used / _MB, info.total / _MB
    except Exception:
        return None, None


def _nvml_handle(nvml: Any, cuda_index: int) -> Any:
    # CUDA_VISIBLE_DEVICES renumbers devices for CUDA but not for NVML: match them by UUID.
    try:
        uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
        return nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
    except Exception:
        return nvml.nvmlDeviceGetHandleByIndex(cuda_index)


def nvml() -> Any:
    """pynvml, initialised once per process (the heartbeat, the metrics and the probes share it);
    False when the library or the driver is missing."""
    return _nvml_module()


def _nvml_module() -> Any:
    """pynvml, initialised once per process; False when the library or the driver is missing."""
    global _nvml
    if _nvml is None:
        try:
            import pynvml

            pynvml.nvmlInit()
            _nvml = pynvml
        except Exception:
            _nvml = False
    return _nvml
