"""What an experiment keeps on disk (``$FEDWEB_DATA_DIR/checkpoints/<id>/``), and how much of it.

A run writes full checkpoints (``round-NNNNNN.safetensors``, with the per-client rows of a client
algorithm beside them in ``round-NNNNNN.clients/``), the round state of its newest rounds
(``state-NNNNNN.safetensors``: what the next round loads) and, for a client algorithm that keeps
per-client state (SCAFFOLD's control variates, Ditto's personal models), that state in
``client_state/``: clients × parameters floats, often the largest part. Retention, by setting:

- while a run can still go on (queued, running, paused): the newest ``FEDWEB_ROUND_STATES_KEEP``
  round states (the worker drops older ones as it writes: workers/round_state.py) and the newest
  ``CHECKPOINT_KEEP`` checkpoints;
- once it has completed, nothing more runs from it: only the newest ``FEDWEB_FINISHED_CHECKPOINTS_KEEP``
  checkpoints (the last holds the final model), no round state and no live per-client state
  (:func:`settle`, called as it completes);
- a cancelled, failed or crashed run also keeps its newest round state when it is newer than its
  newest checkpoint: that is where its last model is.

``manage.py disk`` reports every experiment's use and, with ``--prune``, applies this to runs that
were kept before it (or whose completion was recorded by a reconciler) and deletes the folders of
experiments that no longer exist. The experiment's page shows its use (:func:`usage`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from orchestrator.experiments.models import FINISHED, Status
from orchestrator.experiments.records import Checkpoint, checkpoint_folder

STATE = re.compile(r"^state-(\d{6,})\.safetensors$")
CHECKPOINT = re.compile(r"^round-(\d{6,})\.safetensors$")
SNAPSHOT = re.compile(r"^round-(\d{6,})\.clients$")
CLIENT_STATE = "client_state"


@dataclass
class Usage:
    """Bytes of an experiment's folder by kind, and how many checkpoints and round states."""

    checkpoints: int = 0  # the files and their .clients folders
    states: int = 0
    client_state: int = 0
    other: int = 0  # temporary files of interrupted writes, anything else
    counts: dict[str, int] = field(default_factory=lambda: {"checkpoints": 0, "states": 0})

    @property
    def total(self) -> int:
        return self.checkpoints + self.states + self.client_state + self.other


def size_of(path: Path) -> int:
    """Bytes of a file, or of every file under a folder (0 when it is gone)."""
    if path.is_file() and not path.is_symlink():
        return path.stat().st_size
    if not path.is_dir():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def usage(experiment_id: int) -> Usage:
    """What the experiment's folder holds, by kind."""
    used = Usage()
    folder = checkpoint_folder(experiment_id)
    if not folder.is_dir():
        return used
    for path in folder.iterdir():
        size = size_of(path)
        if CHECKPOINT.match(path.name) or SNAPSHOT.match(path.name):
            used.checkpoints += size
            used.counts["checkpoints"] += bool(CHECKPOINT.match(path.name))
        elif STATE.match(path.name):
            used.states += size
            used.counts["states"] += 1
        elif path.name == CLIENT_STATE:
            used.client_state += size
        else:
            used.other += size
    return used


def _numbered(folder: Path, pattern: re.Pattern) -> list[tuple[int, Path]]:
    """The files of ``folder`` named by ``pattern``, newest round first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := pattern.match(p.name))]
    return sorted(found, reverse=True)


def _remove(path: Path) -> int:
    size = size_of(path)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
    return size - size_of(path)


def drop_checkpoints(experiment, keep: int, *, unrecorded: bool = False) -> int:
    """Delete all but the newest ``keep`` checkpoints (files, client snapshots and rows); with
    ``unrecorded``, checkpoint files no row names too (an interrupted retention): only for a finished
    run, as a running one's worker writes a checkpoint's file before its row. Bytes freed."""
    freed = 0
    for old in Checkpoint.objects.filter(experiment=experiment).order_by("-round")[keep:]:
        freed += _remove(Path(old.path)) + _remove(Path(old.path).with_name(f"{Path(old.path).stem}.clients"))
        old.delete()
    if not unrecorded:
        return freed
    folder = checkpoint_folder(experiment.pk)
    kept = set(Checkpoint.objects.filter(experiment=experiment).values_list("round", flat=True))
    for number, path in _numbered(folder, CHECKPOINT) + _numbered(folder, SNAPSHOT):
        if number not in kept:
            freed += _remove(path)
    return freed


def drop_states(experiment_id: int, keep: int, *, newer_than: int = -1) -> int:
    """Delete all but the newest ``keep`` round states, and any not newer than round ``newer_than``."""
    freed = 0
    for i, (number, path) in enumerate(_numbered(checkpoint_folder(experiment_id), STATE)):
        if i >= keep or number <= newer_than:
            freed += _remove(path)
    return freed


def _drop_leftovers(experiment_id: int) -> int:
    # Temporary files of writes a killed process never finished (``.name.pid.tmp``): never read.
    folder = checkpoint_folder(experiment_id)
    if not folder.is_dir():
        return 0
    return sum(_remove(p) for p in folder.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp"))


def settle(experiment) -> int:
    """Apply the retention of ``experiment``'s status (see the module's docstring); bytes freed.
    A run that can go on keeps what its next round may load; a finished one only its results."""
    if experiment.status not in FINISHED:
        freed = drop_states(experiment.pk, settings.FEDWEB_ROUND_STATES_KEEP)
        return freed + drop_checkpoints(experiment, settings.CHECKPOINT_KEEP)
    freed = drop_checkpoints(experiment, settings.FEDWEB_FINISHED_CHECKPOINTS_KEEP, unrecorded=True)
    freed += _drop_leftovers(experiment.pk)
    newest = Checkpoint.objects.filter(experiment=experiment).order_by("-round").values_list("round", flat=True).first()
    # A completed run's last checkpoint is its final model; a stopped one's may be older than its last state.
    keep_state = 0 if experiment.status == Status.COMPLETED else 1
    freed += drop_states(experiment.pk, keep_state, newer_than=-1 if newest is None else newest)
    return freed + _remove(checkpoint_folder(experiment.pk) / CLIENT_STATE)


def orphan_folders(existing_ids: set[int]) -> list[Path]:
    """Folders under ``checkpoints/`` of experiments that no longer exist (a delete whose files stayed)."""
    root = Path(settings.FEDWEB_DATA_DIR) / "checkpoints"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and (not p.name.isdigit() or int(p.name) not in existing_ids))


def remove(path: Path) -> int:
    """Delete a file or folder; the bytes it held."""
    return _remove(path)
