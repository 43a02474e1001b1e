"""Device choice in one place: the spec's ``compute.device`` string to a list of torch devices."""

from __future__ import annotations

import torch

from workers.engine.spec import SpecError


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
