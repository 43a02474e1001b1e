"""Memory and thread probes: what each round reports, so a leak shows up at once on the charts.

Host figures come from psutil; device figures from PyTorch's CUDA allocator and, when the NVIDIA
driver is there, from NVML (which also sees memory held outside PyTorch, e.g. by other
processes). Every NVML failure is swallowed: a CPU-only host simply reports None.
"""

from __future__ import annotations

from typing import Any

import psutil
import torch

_MB = 1024 * 1024
_process = psutil.Process()
_nvml: Any = None  # the pynvml module once initialised, False when unavailable, None before trying


def probe(device: torch.device | str) -> dict[str, float | int | None]:
    """Process RSS and threads, plus allocator and NVML memory of ``device`` (None on CPU)."""
    device = torch.device(device)
    out: dict[str, float | int | None] = {
        "rss_mb": _process.memory_info().rss / _MB,
        "threads": _process.num_threads(),
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
        out["vram_peak_mb"] = torch.cuda.max_memory_allocated(index) / _MB
        used, total = _nvml_memory(index)
        out["nvml_used_mb"], out["nvml_total_mb"] = used, total
    return out


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
