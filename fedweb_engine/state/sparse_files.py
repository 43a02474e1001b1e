"""File helpers of the per-client state (client_state.py): copying a sparse file's data regions without
filling its holes, and writing a small JSON file atomically (a new one, or one rewritten in place)."""

from __future__ import annotations

import json
import os
from pathlib import Path

COPY_CHUNK = 64 << 20  # bytes per read when copying a base: bounds the memory a snapshot takes
JSON_BYTES = 512  # what rewrite_json writes: one write within a disk sector


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


def rewrite_json(path: Path, value: dict) -> None:
    """Overwrite the JSON file ``path`` in place with ``value``, padded with spaces to ``JSON_BYTES``:
    one write of a fixed length at offset 0, so a killed process leaves the old or the new file whole.

    Not :func:`write_json`'s rename: ext4 flushes a file renamed over another one before the rename
    (``auto_da_alloc``), and a round's two header updates then waited ~1.5 ms each on the disk.
    """
    data = json.dumps(value).encode()
    fd = os.open(path, os.O_WRONLY)
    try:
        if len(data) < JSON_BYTES and os.fstat(fd).st_size <= JSON_BYTES:  # else a longer old tail would stay
            if os.pwrite(fd, data.ljust(JSON_BYTES), 0) != JSON_BYTES:
                raise OSError(f"short write to {path}")
            return
    finally:
        os.close(fd)
    write_json(path, value)
