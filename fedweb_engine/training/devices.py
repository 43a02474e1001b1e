"""Device choice in one place: the spec's ``compute.device`` string to a list of torch devices."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import torch

from fedweb_engine.spec.schema import SpecError


def resolve_devices(device: str) -> list[torch.device]:
    """``auto`` → first GPU or CPU; ``cuda:all`` → every visible GPU (client groups go round-robin)."""
    has_cuda = torch.cuda.is_available()
    if device == "auto":
        return [torch.device("cuda", torch.cuda.current_device())] if has_cuda else [torch.device("cpu")]
    if device == "cpu":
        return [torch.device("cpu")]
    if not has_cuda:
        raise SpecError("compute.device", f"is {device!r} but no CUDA GPU is visible to this worker")
    count = torch.cuda.device_count()
    if device == "cuda":
        return [torch.device("cuda", torch.cuda.current_device())]
    if device == "cuda:all":
        return [torch.device("cuda", i) for i in range(count)]
    index = int(device.split(":", 1)[1])
    if index >= count:
        raise SpecError("compute.device", f"is {device!r} but only {count} GPU(s) are visible")
    return [torch.device("cuda", index)]


def describe(devices: list[torch.device]) -> str:
    """A human label: ``cpu``, ``cuda:0 (NVIDIA H100 80GB HBM3)``, ``cuda:0-3 (4× NVIDIA H100)``."""
    first = devices[0]
    if first.type != "cuda":
        return str(first)
    name = torch.cuda.get_device_name(first)
    if len(devices) == 1:
        return f"{first} ({name})"
    return f"cuda:{devices[0].index}-{devices[-1].index} ({len(devices)}× {name})"


def fits_on(device: torch.device, nbytes: int, share: float = 0.5) -> bool:
    """Whether ``nbytes`` of client data may live on ``device`` (at most ``share`` of free memory)."""
    if device.type != "cuda":
        return True
    free, _total = torch.cuda.mem_get_info(device)
    return nbytes <= share * free


def prepare(devices: list[torch.device], precision: str, capability=None) -> None:
    """Set a process up for training on ``devices`` in ``precision``: the one place for it.

    On CUDA, fp32 matmuls may use TF32 tensor cores (``set_float32_matmul_precision("high")``:
    about 10 bits of mantissa in the products, fp32 accumulation), which is what makes fp32
    training on an Ampere-or-later GPU fast; CPUs are left alone. bf16 needs compute capability
    8.0 (Ampere) or newer: older GPUs would emulate it slowly or fail inside a kernel, so it is
    refused here with the field's name. ``capability`` (device -> (major, minor)) is for tests.
    """
    cuda = [d for d in devices if d.type == "cuda"]
    if not cuda:
        return
    torch.set_float32_matmul_precision("high")
    if precision == "bf16":
        read = capability or torch.cuda.get_device_capability
        for d in cuda:
            major, minor = read(d)
            if major < 8:
                raise SpecError(
                    "compute.precision",
                    f"is 'bf16' but {d} has compute capability {major}.{minor} (bf16 needs 8.0 or newer): use fp16 or fp32",
                )


def synchronize(devices: Sequence[torch.device]) -> None:
    """Wait for queued GPU work so per-round timings are not shifted into the next round."""
    for d in devices:
        if d.type == "cuda":
            torch.cuda.synchronize(d)


def free_memory(devices: Sequence[torch.device]) -> None:
    """Return what was just dropped: cycles first (modules hold some), then the allocator's cache."""
    gc.collect()
    if any(d.type == "cuda" for d in devices):
        torch.cuda.empty_cache()
