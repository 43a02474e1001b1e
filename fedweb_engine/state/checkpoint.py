"""Checkpoint files: one safetensors file of tensors plus JSON metadata, no pickle.

:func:`write_checkpoint` is the one place a checkpoint reaches the disk (the engine CLI and the
Celery workers both go through ``Simulation.save_checkpoint``, which calls it), and it writes
atomically: a crash mid-write leaves the previous file under the real name, never a torn one.
What the tensors and metadata hold is the simulation's business (``Simulation.state_dict``). The
per-client state is too big to hold in memory: ``Simulation.save_checkpoint`` copies its rows into a
folder beside the file first (``client_states.snapshot_folder``), and the metadata names that folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

CHECKPOINT_FORMAT = 1  # bump when the tensors or metadata change meaning; old files are refused
_META_KEY = "fedweb"


def write_checkpoint(path: str | Path, tensors: dict[str, torch.Tensor], meta: dict, *, fsync: bool = True) -> int:
    """Write ``tensors`` and ``meta`` (JSON-able) to ``path`` atomically; returns the file's size.

    The file is written under a temporary name in the same folder, flushed to disk (unless
    ``fsync`` is false), then moved over ``path`` with ``os.replace`` (atomic within one file
    system). Without the flush a process crash still leaves a whole file (the page cache survives
    it); only a power cut may leave a torn one, which :func:`read_checkpoint` refuses.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # per process: two writers never share it
    try:
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in tensors.items()},
            str(tmp),
            metadata={_META_KEY: json.dumps({**meta, "format": CHECKPOINT_FORMAT})},
        )
        if fsync:
            _flush_to_disk(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def read_checkpoint(path: str | Path) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors (on the CPU) and metadata of a checkpoint; ``ValueError`` for an unknown format."""
    with safe_open(str(path), framework="pt") as f:
        meta = json.loads(f.metadata()[_META_KEY])
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"unsupported checkpoint format {meta.get('format')!r}")
    snapshot = (meta.get("client_state") or {}).get("snapshot")
    if snapshot:  # the per-client rows copied beside the file (client_state.py): a name, never a path
        meta["client_state"]["snapshot"] = str(Path(path).parent / Path(snapshot).name)
    return tensors, meta


def _flush_to_disk(path: Path) -> None:
    # Without this a power cut after the rename can leave an empty file under the real name on
    # file systems that reorder metadata and data writes (ext4 with delalloc, XFS).
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
