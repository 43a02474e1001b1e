"""An experiment's round states on disk: what its next round needs, published after every round.

After round ``r`` is trained, and before it is recorded, its worker writes ``state-<r>.safetensors``
(``Simulation.state_dict``: the global model, codec residuals, strategy buffers, the RNG, loss
scales, the DP clip norm and participation counts; the broadcast weights only for a top-k
downlink, see fedweb_engine/state/round_state.py) into the experiment's
checkpoint folder, which every worker reads (``FEDWEB_DATA_DIR``). Any worker then runs round
``r + 1`` by loading exactly state ``r``: never a newer one (the name is the round), never a replay.

Ordering is what makes it safe:

* state ``r`` is on disk before round ``r`` is recorded, so before round ``r + 1`` can be sent;
* the newest ``FEDWEB_ROUND_STATES_KEEP`` states are kept (two by default), so a crash after writing
  state ``r`` and before recording round ``r`` leaves state ``r - 1`` for the re-run of round ``r``
  (which writes state ``r`` again, alike: the engine is deterministic given its state); with one,
  that re-run replays from the newest checkpoint instead;
* the write is atomic (a temporary name, then ``os.replace``) but not flushed with fsync: a killed
  worker leaves whole files (the page cache outlives the process) and only a power cut can tear
  one. A torn or missing state is not trusted: the worker falls back to the newest readable state
  or full checkpoint before it and replays (the crash path, logged as a warning). The flush would
  cost a multiple of the write (benchmarks/round_state.py) for a case the replay already covers.

Per-client state (an algorithm's control variates or personal models: one row per client, too big
for the state file) lives beside it in ``client_state/`` (fedweb_engine/state/client_rows.py). The state
file records its round; round ``r``'s rows are a journal committed before state ``r`` is written and
folded into the shared rows only once round ``r + 1`` has run, so loading state ``r`` (or ``r - 1``
for the re-run of an unrecorded round ``r``) finds exactly its rows. Full checkpoints copy the rows
into ``round-<r>.clients/`` beside them.

The files go with the experiment's folder when it is deleted (``orchestrator.experiments.models``).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import torch
from django.conf import settings

from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.state.checkpoint import read_checkpoint, write_checkpoint
from fedweb_engine.state.round_state import compact_state, complete_state
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import checkpoint_folder

log = logging.getLogger(__name__)

_NAME = re.compile(r"^state-(\d{6,})\.safetensors$")


def state_path(experiment_id: int, round_number: int) -> Path:
    return checkpoint_folder(experiment_id) / f"state-{round_number:06d}.safetensors"


def publish(experiment_id: int, sim: Simulation) -> int:
    """Write the state ``sim`` is in (after round ``sim.round``) and drop states older than the
    newest ``FEDWEB_ROUND_STATES_KEEP``; returns the file's size in bytes."""
    tensors, meta = compact_state(sim)
    size = write_checkpoint(state_path(experiment_id, sim.round), tensors, meta, fsync=False)
    for round_number, path in _published(experiment_id):
        if round_number <= sim.round - settings.FEDWEB_ROUND_STATES_KEEP:
            path.unlink(missing_ok=True)
    return size


def read(path: Path, round_number: int) -> tuple[dict[str, torch.Tensor], dict] | None:
    """The tensors and metadata of the state (or checkpoint) file ``path`` if it is readable and
    holds round ``round_number``; None if it is missing, torn or of another round."""
    try:
        tensors, meta = read_checkpoint(path)
    except FileNotFoundError:
        return None
    except Exception as e:  # a torn file (power cut), or a foreign one: not trusted
        log.warning("unreadable round state %s: %s: %s", path, type(e).__name__, e)
        return None
    return (complete_state(tensors), meta) if meta.get("round") == round_number else None


def origins(experiment: Experiment, at_most: int) -> list[tuple[int, Path]]:
    """Files a simulation of round ``at_most`` or before can be loaded from (published states and
    full checkpoints), newest first: the crash path replays from the first readable one."""
    found = [(r, p) for r, p in _published(experiment.pk) if r <= at_most]
    found += [(c.round, Path(c.path)) for c in experiment.checkpoints.filter(round__lte=at_most)]
    return sorted(found, key=lambda rp: rp[0], reverse=True)


def _published(experiment_id: int) -> list[tuple[int, Path]]:
    folder = checkpoint_folder(experiment_id)
    if not folder.is_dir():
        return []
    return [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.match(p.name))]
