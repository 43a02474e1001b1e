"""The GPUs a worker may use, as NVML sees them (heartbeats and the worker's metrics).

Read through NVML, never ``torch.cuda``: initialising CUDA in the Celery parent would break the
forked pool processes that run the rounds. NVML is initialised once per process
(:func:`fedweb_engine.probes.memory.nvml`), not per heartbeat or scrape.

Which GPUs: ``CUDA_VISIBLE_DEVICES`` as CUDA reads it. Its entries are indices, GPU UUIDs
(``GPU-8a3c…``, or a unique prefix of one) or MIG instances (``MIG-…``); CUDA stops at the first
entry it cannot read. An index counts in CUDA's order, which the worker sets to NVML's PCI order
(``CUDA_DEVICE_ORDER=PCI_BUS_ID``, fedweb/celery.py); UUIDs need no order at all.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from fedweb_engine.probes.memory import nvml

log = logging.getLogger(__name__)
_MB = 2**20


def parse_visible(value: str | None) -> list[int | str] | None:
    """``CUDA_VISIBLE_DEVICES`` parsed: indices as ints, UUID and MIG entries as strings; None
    when unset (every GPU). Parsing stops at the first invalid entry, as CUDA's does."""
    if value is None:
        return None
    entries: list[int | str] = []
    for raw in value.split(","):
        entry = raw.strip()
        if entry.isdigit():
            entries.append(int(entry))
        elif entry.startswith(("GPU-", "MIG-")) and len(entry) > 4:
            entries.append(entry)
        else:
            break
    return entries


def gpu_devices() -> list[dict]:
    """The GPUs this process may use, in CUDA's numbering (``index`` is what ``cuda:N`` names),
    with NVML's memory figures; [] without NVML."""
    lib = nvml()
    if not lib:
        return []
    try:
        handles = visible_handles(lib, parse_visible(os.environ.get("CUDA_VISIBLE_DEVICES")))
        return [_describe(lib, k, handle) for k, handle in enumerate(handles)]
    except Exception:
        log.warning("could not read GPUs through NVML", exc_info=True)
        return []


def visible_handles(lib: Any, entries: list[int | str] | None) -> list[Any]:
    """NVML handles of the visible GPUs, in CUDA's order. An index beyond the GPUs, or a UUID that
    matches none (or several), ends the list there, as it ends CUDA's."""
    count = lib.nvmlDeviceGetCount()
    if entries is None:
        return [lib.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
    uuids = [_text(lib.nvmlDeviceGetUUID(lib.nvmlDeviceGetHandleByIndex(i))) for i in range(count)]
    handles = []
    for entry in entries:
        if isinstance(entry, int):
            if entry >= count:
                break
            handles.append(lib.nvmlDeviceGetHandleByIndex(entry))
        elif entry.startswith("MIG-"):
            handles.append(lib.nvmlDeviceGetHandleByUUID(entry))
        else:
            matches = [i for i, uuid in enumerate(uuids) if uuid.startswith(entry)]
            if len(matches) != 1:
                break
            handles.append(lib.nvmlDeviceGetHandleByIndex(matches[0]))
    return handles


def _describe(lib: Any, index: int, handle: Any) -> dict:
    mem = lib.nvmlDeviceGetMemoryInfo(handle)
    return {
        "index": index,
        "name": _text(lib.nvmlDeviceGetName(handle)),
        "uuid": _text(lib.nvmlDeviceGetUUID(handle)),
        "total_mb": round(mem.total / _MB),
        "used_mb": round(mem.used / _MB),
    }


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
