"""Engine handling inside a worker process: a bounded simulation cache, rebuilding from
checkpoints, and checkpoint files; the out-of-memory retry is workers.oom's.

Any worker can continue any experiment: the cache is only a shortcut. Without a cached
simulation at the right round, one is rebuilt from the latest checkpoint and the rounds after it
are replayed (the engine is deterministic given its state, so replay reproduces them exactly).
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch
from django.conf import settings

from orchestrator.limits import datasets_root
from orchestrator.models import Checkpoint, Experiment, checkpoint_folder
from workers.engine.checkpoint import read_checkpoint
from workers.engine.result import RoundResult
from workers.engine.runner import Simulation
from workers.oom import RoundFailed, with_retry  # noqa: F401  (tasks catch runtime.RoundFailed)
from workers.progress import LogLine

# Two entries: the experiment running now and the one it interleaves with on this worker. More
# would hold more models and datasets in (GPU) memory for no gain; memory must stay flat.
CACHE_SIZE = 2


@dataclass
class _Entry:
    sim: Simulation
    group_size: int  # client group size in use (smaller than the spec's after an OOM)


_cache: OrderedDict[int, _Entry] = OrderedDict()


def train_round(experiment: Experiment, round_number: int, log_line: LogLine) -> tuple[RoundResult, Simulation]:
    """Train ``round_number`` of ``experiment`` on this worker; on CUDA out-of-memory retry it with
    half the client group size (workers.oom). Returns the round's result and the simulation."""

    def run(group_size: int | None) -> tuple[RoundResult, Simulation]:
        sim = _simulation_for(experiment, round_number, log_line, group_size=group_size).sim
        return sim.next_round(), sim

    return with_retry(experiment, round_number, log_line, run, forget)


def simulation_at(
    experiment: Experiment, round_number: int, log_line: LogLine, group_size: int | None = None
) -> Simulation:
    """A simulation that has completed exactly ``round_number - 1`` rounds (for a sharded round)."""
    return _simulation_for(experiment, round_number, log_line, group_size=group_size).sim


def _simulation_for(
    experiment: Experiment, round_number: int, log_line: LogLine, group_size: int | None = None
) -> _Entry:
    """A simulation that has completed exactly ``round_number - 1`` rounds."""
    want = round_number - 1
    entry = _cache.pop(experiment.pk, None)
    if entry is not None and entry.sim.round < want and group_size is None and entry.sim.spec.compute.shards != 1:
        _catch_up(experiment, entry.sim, want)
    if entry is not None and (entry.sim.round != want or group_size is not None):
        entry.sim.close()
        entry = None
    if entry is None:
        entry = _rebuild(experiment, want, log_line, group_size or experiment.client_group_size)
    _cache[experiment.pk] = entry
    while len(_cache) > CACHE_SIZE:
        _, evicted = _cache.popitem(last=False)
        evicted.sim.close()
        _free_memory()
    return entry


def _rebuild(experiment: Experiment, want: int, log_line: LogLine, group_size: int | None) -> _Entry:
    checkpoint = experiment.latest_checkpoint(at_most=want)
    # Built at the group size it will run with: never at the full size first (after an OOM).
    if checkpoint is not None and Path(checkpoint.path).exists():
        sim = Simulation.from_checkpoint(checkpoint.path, data_root=datasets_root(), client_group_size=group_size)
        origin = f"the checkpoint of round {checkpoint.round}"
    else:
        sim = Simulation(experiment.parsed_spec(), data_root=datasets_root(), client_group_size=group_size)
        origin = "the start"
    for note in sim.notes:  # e.g. a plugin model that trains sequentially, and why
        log_line("warning", note)
    group_size = sim.spec.compute.client_group_size
    if sim.round < want:
        log_line("info", f"Rebuilt from {origin}; replaying rounds {sim.round + 1}..{want}")
    while sim.round < want:
        sim.next_round()  # already recorded: the results are discarded, only the state matters
    return _Entry(sim, group_size)


def _catch_up(experiment: Experiment, sim: Simulation, want: int) -> None:
    """Load the published checkpoint of round ``want`` into a cached simulation behind it: a sharded
    experiment's rounds are concluded by any worker, which writes one after every round."""
    checkpoint = experiment.checkpoints.filter(round=want).first()
    if checkpoint is not None and Path(checkpoint.path).exists():
        sim.load_state_dict(*read_checkpoint(checkpoint.path))


def forget(experiment_id: int) -> None:
    entry = _cache.pop(experiment_id, None)
    if entry is not None:
        entry.sim.close()
        _free_memory()


def _free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def checkpoint_due(round_number: int, total_rounds: int) -> bool:
    return round_number % settings.CHECKPOINT_EVERY == 0 or round_number == total_rounds


def save_checkpoint(experiment: Experiment, sim: Simulation) -> Checkpoint:
    """Write the simulation's state, record it, and keep only the newest few files.

    ``Simulation.save_checkpoint`` writes atomically (workers.engine.checkpoint): a crash mid-write
    never leaves a truncated file under the name recorded here.
    """
    path = checkpoint_folder(experiment.pk) / f"round-{sim.round:06d}.safetensors"
    size = sim.save_checkpoint(path)
    checkpoint, _ = Checkpoint.objects.update_or_create(
        experiment=experiment, round=sim.round, defaults={"path": str(path), "size_bytes": size}
    )
    for old in experiment.checkpoints.order_by("-round")[settings.CHECKPOINT_KEEP :]:
        Path(old.path).unlink(missing_ok=True)
        old.delete()
    return checkpoint
