"""Per-client state (SCAFFOLD's control variates, Ditto's personal models…) on disk, not in RAM.

A population of 10,000–500,000 clients × a 1.2M-parameter model is 48 GB–2.4 TB of float32: it
cannot be resident. A :class:`ClientStateStore` keeps one row per client in a file under a folder
(for a worker: the experiment's folder under ``FEDWEB_DATA_DIR``), and a round reads only its
cohort's rows (:meth:`~ClientStateStore.gather`) and writes them back
(:meth:`~ClientStateStore.scatter`). Rows are read and written in place with ``pread``/``pwrite``,
not through a memory map: mapped pages count towards the process's resident memory, so a mapped
file would grow the worker's RSS with every client it touched. The file is sparse: a client never
seen reads as zeros and takes no disk.

Crash recovery and moving an experiment between workers stay exact because a round's rows are
never written over the only copy of the rows before it:

* ``<name>.f32`` is the *base*, ``[num_clients, width]`` float32; ``<name>.json`` records the round
  it reflects (and, while rows are being copied into it, the round being applied);
* :meth:`~ClientStateStore.scatter` appends the round's new rows to a temporary journal;
  :meth:`~ClientStateStore.commit` (round ``r``) renames it to ``<name>.journal-<r>`` and only then
  folds journal ``r - 1`` into the base: round ``r - 1`` is recorded, since round ``r`` ran;
* a store told it is at round ``t`` (:meth:`~ClientStateStore.at`, from the round state a worker
  loaded) folds journals ``< t`` into the base, keeps journal ``t`` as an overlay that
  :meth:`~ClientStateStore.gather` reads through, and drops journals ``> t`` and temporary files:
  those are rounds of an attempt that crashed before it was recorded, which will run again alike.

So the files reflect round ``t`` as long as the base has not passed it: any worker, or the same
one after ``kill -9``, continues from the round state it loads. A round older than the base (a
torn round state on the crash path) raises :class:`StateUnavailable`, and the worker falls back to
a full checkpoint: :meth:`~ClientStateStore.save_snapshot` copies the rows beside it (sparse: only
clients seen take space), and :meth:`~ClientStateStore.load_snapshot` puts them back. No fsync, as for round states (workers/round_state.py): a killed process leaves whole files; a torn journal is refused.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.state.sparse_files import copy_data, rewrite_json, write_json

FORMAT = 1
_ROW_BYTES = 4  # float32
_TRAILER = struct.Struct("<8sqqq")  # magic, round, rows, width: written last, so a torn journal has none
_MAGIC = b"FWCSJ001"


class StateUnavailable(RuntimeError):
    """The rows of the asked round cannot be rebuilt from the files (the base is past it, or a
    journal is missing or torn): load a checkpoint with a snapshot, or start over."""


class ClientStateStore:
    """Per-client state rows [num_clients, width] (float32), in files under a folder; bounded RSS.

    ``gather`` reads the rows as of the last commit (rows scattered in the current round are not
    visible until :meth:`commit`); ``scatter`` stages rows for the round; ``commit(r)`` publishes
    them as round ``r``'s. Memory held is the rows asked for, plus one small index per journal.
    """

    def __init__(self, folder: Path, num_clients: int, width: int, *, name: str = "state"):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name.startswith("."):
            raise ValueError(f"client state name {name!r}: use letters, digits, '_', '-' or '.'")
        for field, value in (("num_clients", num_clients), ("width", width)):
            if int(value) < 1:
                raise ValueError(f"client state {name!r}: {field} must be at least 1, got {value}")
        self.folder, self.name = Path(folder), name
        self.num_clients, self.width = int(num_clients), int(width)
        self.row_bytes = self.width * _ROW_BYTES
        self.folder.mkdir(parents=True, exist_ok=True)
        self.base_path = self.folder / f"{name}.f32"
        self.header_path = self.folder / f"{name}.json"
        with self._locked():
            header = self._read_header()
            if header is None:
                self._create_base()
            else:
                self._check_shape(header, self.header_path)
        self._fd = os.open(self.base_path, os.O_RDWR)
        self._target: int | None = None  # the round the rows should reflect; None: the newest on disk
        self._synced: int | None = None  # the round they do reflect, once checked against the files
        self._overlay: dict[int, tuple[int, int]] = {}  # client -> (journal round, row) above the base
        self._staged: tuple[int, Path, int, list[int]] | None = None  # round, temp journal, fd, ids

    # -- the agreed interface -------------------------------------------------------------------

    def gather(self, client_ids: torch.Tensor, device: torch.device) -> torch.Tensor:
        """The rows of ``client_ids`` ([G] integers) as of the last commit, as a [G, width] tensor on
        ``device``. Clients never scattered read as zeros."""
        ids = self._check_ids(client_ids)
        self._sync()
        out = torch.empty(len(ids), self.width, dtype=torch.float32)
        rows = out.numpy()
        journals: dict[int, int] = {}
        try:
            for k, client in enumerate(ids):
                where = self._overlay.get(client)
                if where is None:
                    self._read_into(self._fd, rows[k], client * self.row_bytes, self.base_path)
                else:
                    r, row = where
                    if r not in journals:
                        journals[r] = os.open(self._journal_path(r), os.O_RDONLY)
                    self._read_into(journals[r], rows[k], row * self.row_bytes, self._journal_path(r))
        finally:
            for fd in journals.values():
                os.close(fd)
        return out.to(device)

    def scatter(self, client_ids: torch.Tensor, rows: torch.Tensor) -> None:
        """Stage ``rows`` ([G, width]) as the new state of ``client_ids`` ([G]) for this round;
        nothing is visible or durable before :meth:`commit`. A client scattered twice keeps the
        last row."""
        ids = self._check_ids(client_ids)
        if rows.dim() != 2 or rows.shape[1] != self.width:
            raise ValueError(
                f"client state {self.name!r}: rows must be [G, width={self.width}], got {list(rows.shape)} (width)"
            )
        if rows.shape[0] != len(ids):
            raise ValueError(f"client state {self.name!r}: {rows.shape[0]} rows for {len(ids)} client_ids (rows)")
        self._sync()
        staged = self._stage()
        host = rows.detach().to("cpu", torch.float32).contiguous().numpy()
        # The rows follow each other in the journal as they do in ``host``: one write, not one a row.
        if os.pwrite(staged[2], memoryview(host).cast("B"), len(staged[3]) * self.row_bytes) != host.nbytes:
            raise OSError(f"short write to {staged[1]}")
        staged[3].extend(ids)

    def commit(self, round_number: int) -> None:
        """Publish the rows scattered since the last commit as round ``round_number``'s (a journal
        renamed into place), then fold the round before it into the base. Call once per round,
        rounds in order, also for a round that scattered nothing; committing the round the rows
        already reflect, with nothing staged since, does nothing (the runner and an algorithm may
        both commit)."""
        if self._staged is None and round_number == self._target:
            return
        self._sync()
        if round_number != self._synced + 1:
            raise ValueError(
                f"client state {self.name!r}: commit of round {round_number} after round {self._synced} "
                f"(round_number must be {self._synced + 1})"
            )
        staged = self._stage()
        rows, path, fd, ids = staged
        try:
            id_bytes = np.asarray(ids, dtype=np.int64).tobytes()
            os.pwrite(fd, id_bytes, len(ids) * self.row_bytes)
            os.pwrite(fd, _TRAILER.pack(_MAGIC, round_number, len(ids), self.width), len(ids) * (self.row_bytes + 8))
        finally:
            os.close(fd)
            self._staged = None
        with self._locked():
            os.replace(path, self._journal_path(round_number))
            self._apply_journals(below=round_number)
        # Checked against the files again at the next round's first use: if another worker ran a
        # round meanwhile (and crashed before it was recorded), this view would be stale.
        self._target, self._synced, self._overlay = round_number, None, {}

    # -- round boundaries -----------------------------------------------------------------------

    def at(self, round_number: int, *, check: bool = True) -> None:
        """The rows should reflect the end of ``round_number`` (the round state just loaded); checked
        against the files now, or with ``check`` false at first use (:class:`StateUnavailable` if
        they are past it). Round 0 resets them, at first use: a simulation is built at round 0 before
        it loads a round state, and must not wipe the rows that state needs."""
        self._discard_staged()
        self._target, self._synced = int(round_number), None
        if check and round_number > 0:
            self._sync()

    @property
    def round(self) -> int:
        """The round the rows reflect."""
        self._sync()
        return self._synced

    def save_snapshot(self, folder: Path) -> None:
        """Copy the rows as of the last commit into ``folder`` (sparse: only the rows of clients seen
        take space); :meth:`load_snapshot` puts them back. Memory: one copy chunk."""
        self._sync()
        folder.mkdir(parents=True, exist_ok=True)
        with self._locked():
            dest = folder / self.base_path.name
            with open(dest, "wb") as out:
                out.truncate(self.num_clients * self.row_bytes)
                copy_data(self._fd, out.fileno())
                for r in sorted({r for r, _ in self._overlay.values()}):
                    with open(self._journal_path(r), "rb") as journal:
                        for client, (rr, row) in self._overlay.items():
                            if rr == r:
                                data = os.pread(journal.fileno(), self.row_bytes, row * self.row_bytes)
                                os.pwrite(out.fileno(), data, client * self.row_bytes)
            write_json(folder / self.header_path.name, self._header(self._synced))

    def load_snapshot(self, folder: Path, round_number: int) -> None:
        """Replace the rows with those :meth:`save_snapshot` wrote into ``folder`` at ``round_number``."""
        self._discard_staged()
        header_path = folder / self.header_path.name
        try:
            header = json.loads(header_path.read_text())
        except (OSError, ValueError) as e:
            raise StateUnavailable(f"client state {self.name!r}: no readable snapshot in {folder} ({e})") from e
        self._check_shape(header, header_path)
        if header.get("round") != round_number:
            raise StateUnavailable(
                f"client state {self.name!r}: the snapshot in {folder} is of round {header.get('round')}, "
                f"not {round_number}"
            )
        with self._locked():
            self._clear(round_number=None)
            with open(folder / self.base_path.name, "rb") as src:
                copy_data(src.fileno(), self._fd)
            self._drop_journals(lambda r: True)
            write_json(self.header_path, self._header(round_number))
        self._target = self._synced = round_number
        self._overlay = {}

    def disk_bytes(self) -> int:
        """Bytes the store's files take on disk (allocated blocks, so holes count nothing)."""
        return sum(p.stat().st_blocks * 512 for p in self.folder.glob(f"{self.name}.*") if p.is_file())

    def close(self) -> None:
        self._discard_staged()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    # -- files ----------------------------------------------------------------------------------

    def _sync(self) -> None:
        """Bring the view to round ``_target`` (once per round): see the module's docstring."""
        if self._synced is not None:
            return
        with self._locked():
            header = self._read_header()
            journals = self._journal_rounds()
            target = self._target
            if target is None:  # no round given: everything committed on disk
                target = max([header["round"], *[r for r in journals if r > header["round"]]])
            if target == 0 and (header["round"] > 0 or header.get("applying") is not None):
                self._clear(round_number=0)  # the run started over
                header = self._read_header()
            base = header["round"]
            applying = header.get("applying")
            if base > target or (applying is not None and applying > target):
                raise StateUnavailable(
                    f"client state {self.name!r}: the files reflect round {max(base, applying or 0)}, "
                    f"past round {target}"
                )
            self._drop_journals(lambda r: r > target)
            missing = [r for r in range(base + 1, target + 1) if r not in journals or not self._journal_valid(r)]
            if missing:
                raise StateUnavailable(f"client state {self.name!r}: journal of round {missing[0]} missing or torn")
            self._apply_journals(below=target)
            self._overlay = self._index_journals(self._read_header()["round"], target)
        self._target = self._synced = target

    def _apply_journals(self, below: int) -> None:
        """Fold the journals of rounds ``< below`` into the base, oldest first (under the lock).
        Rows are final values, so a fold interrupted half-way is simply done again."""
        header = self._read_header()
        for r in sorted(r for r in self._journal_rounds() if r < below):
            if r <= header["round"]:
                self._journal_path(r).unlink(missing_ok=True)  # folded before a crash removed it
                continue
            rewrite_json(self.header_path, {**header, "applying": r})  # in place: see rewrite_json
            ids = self._journal_ids(r)
            chunk = max(1, (8 << 20) // self.row_bytes)  # rows read at once: 8 MB at most
            with open(self._journal_path(r), "rb") as journal:
                for first in range(0, len(ids), chunk):
                    part = ids[first : first + chunk]
                    data = os.pread(journal.fileno(), len(part) * self.row_bytes, first * self.row_bytes)
                    for row, client in zip(np.frombuffer(data, np.uint8).reshape(len(part), -1), part, strict=True):
                        os.pwrite(self._fd, row, int(client) * self.row_bytes)
            header = self._header(r)
            rewrite_json(self.header_path, header)
            self._journal_path(r).unlink()

    def _index_journals(self, base: int, target: int) -> dict[int, tuple[int, int]]:
        overlay: dict[int, tuple[int, int]] = {}
        for r in range(base + 1, target + 1):
            for row, client in enumerate(self._journal_ids(r)):
                overlay[int(client)] = (r, row)
        return overlay

    def _journal_ids(self, r: int) -> np.ndarray:
        path = self._journal_path(r)
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(size - _TRAILER.size)
            _, _, n, _ = _TRAILER.unpack(f.read(_TRAILER.size))
            f.seek(n * self.row_bytes)
            return np.frombuffer(f.read(n * 8), dtype=np.int64)

    def _journal_valid(self, r: int) -> bool:
        path = self._journal_path(r)
        try:
            size = path.stat().st_size
            with open(path, "rb") as f:
                f.seek(max(0, size - _TRAILER.size))
                magic, round_number, n, width = _TRAILER.unpack(f.read(_TRAILER.size))
        except (OSError, struct.error):
            return False
        ok = magic == _MAGIC and round_number == r and width == self.width
        return ok and size == n * (self.row_bytes + 8) + _TRAILER.size

    def _journal_path(self, r: int) -> Path:
        return self.folder / f"{self.name}.journal-{r:06d}"

    def _journal_rounds(self) -> list[int]:
        pattern = re.compile(rf"^{re.escape(self.name)}\.journal-(\d{{6,}})$")
        return [int(m.group(1)) for p in self.folder.iterdir() if (m := pattern.match(p.name))]

    def _drop_journals(self, which) -> None:
        for r in self._journal_rounds():
            if which(r):
                self._journal_path(r).unlink(missing_ok=True)
        for tmp in self.folder.glob(f".{self.name}.journal-*.tmp"):  # attempts that never committed
            if self._staged is None or tmp != self._staged[1]:
                tmp.unlink(missing_ok=True)

    def _stage(self) -> tuple[int, Path, int, list[int]]:
        if self._staged is None:
            r = self._synced + 1
            fd, name = tempfile.mkstemp(prefix=f".{self.name}.journal-{r:06d}.", suffix=".tmp", dir=self.folder)
            self._staged = (r, Path(name), fd, [])
        return self._staged

    def _discard_staged(self) -> None:
        if self._staged is not None:
            os.close(self._staged[2])
            self._staged[1].unlink(missing_ok=True)
            self._staged = None

    def _create_base(self) -> None:
        with open(self.base_path, "wb") as f:
            f.truncate(self.num_clients * self.row_bytes)  # a hole: no disk until rows are written
        write_json(self.header_path, self._header(0))

    def _clear(self, round_number: int | None) -> None:
        """Every row back to zeros (and, given a round, no journals and that round in the header)."""
        os.ftruncate(self._fd, 0)
        os.ftruncate(self._fd, self.num_clients * self.row_bytes)
        if round_number is not None:
            self._drop_journals(lambda r: True)
            write_json(self.header_path, self._header(round_number))

    def _header(self, round_number: int) -> dict:
        return {"format": FORMAT, "num_clients": self.num_clients, "width": self.width, "round": round_number}

    def _read_header(self) -> dict | None:
        try:
            return json.loads(self.header_path.read_text())
        except FileNotFoundError:
            return None

    def _check_shape(self, header: dict, where: Path) -> None:
        for field in ("num_clients", "width"):
            if header.get(field) != getattr(self, field):
                raise ValueError(
                    f"client state {self.name!r}: {field} is {getattr(self, field)}, "
                    f"but {where} holds {field} {header.get(field)}"
                )

    def _check_ids(self, client_ids: torch.Tensor) -> list[int]:
        ids = torch.as_tensor(client_ids)
        if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
            raise ValueError(f"client state {self.name!r}: client_ids must be a 1-D integer tensor")
        ids = ids.cpu().tolist()
        bad = [c for c in ids if not 0 <= c < self.num_clients]
        if bad:
            raise ValueError(f"client state {self.name!r}: client_ids {bad[:3]} outside 0..{self.num_clients - 1}")
        return ids

    def _read_into(self, fd: int, row: np.ndarray, offset: int, path: Path) -> None:
        if os.preadv(fd, [memoryview(row).cast("B")], offset) != self.row_bytes:
            raise StateUnavailable(f"client state {self.name!r}: short read from {path}")

    @contextmanager
    def _locked(self) -> Iterator[None]:
        # One process folds or commits at a time (a worker and a stale duplicate of its task).
        with open(self.folder / f".{self.name}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            self.close()
