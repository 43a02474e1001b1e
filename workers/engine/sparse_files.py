"""File helpers of the per-client state (client_state.py): copying a sparse file's data regions without
filling its holes, and writing a small JSON file atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path

COPY_CHUNK = 64 << 20  # bytes per read when copying a base: bounds the memory a snapshot takes


def copy_data(src: int, dst: int) -> None:
    """Copy the data regions of file ``src`` into ``dst`` at the same offsets, skipping holes (so a
    sparse file stays sparse), one bounded chunk at a time."""
    size = os.fstat(src).st_size
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
            end = os.lseek(src, start, os.SEEK_HOLE)
        except OSError:  # ENXIO: no data after offset
            return
        while start < end:
            data = os.pread(src, min(COPY_CHUNK, end - start), start)
            os.pwrite(dst, data, start)
            start += len(data)
        offset = end


def write_json(path: Path, value: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)
