"""Engine handling inside a worker process: a bounded simulation cache, switching between
experiments by loading their round state, and checkpoint files; the out-of-memory retry is workers.oom's.

Any worker can continue any experiment: the cache is only a shortcut. Without a cached
simulation at the right round, the worker loads the state the previous round published
(workers/state_files.py) into the simulation it holds, or into a new one built on data the
process keeps loaded (fedweb_engine/data/cache.py): a switch costs a state load, never a replay.
Replay is only the crash path, for a round whose state was never published (or is torn). The
per-client state (fedweb_engine/state/client_rows.py) is in files every worker shares: loading a round
state moves it to that round, and an origin whose rows the files have moved past is skipped.
"""

from __future__ import annotations

import gc
import shutil
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import torch
from django.conf import settings

from fedweb_engine.data import cache as data_cache
from fedweb_engine.distributed.group import RankFailure
from fedweb_engine.results.round_result import RoundResult
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec
from fedweb_engine.state.client_rows import StateUnavailable
from fedweb_engine.state.client_state import snapshot_folder
from fedweb_engine.training import compiled
from orchestrator.experiments.limits import datasets_root
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import Checkpoint, LogLine, checkpoint_folder
from workers import ranks, state_files
from workers.oom import RoundFailed, with_retry  # noqa: F401  (tasks catch runtime.RoundFailed)

# Two entries: the experiment running now and the one it interleaves with on this worker. More
# would hold more models and datasets in (GPU) memory for no gain; memory must stay flat.
CACHE_SIZE = 2


class RoundAborted(RuntimeError):
    """A distributed round that a rank's failure stopped: not recorded, and sent again (not a failure
    of the run: any group, of any size, runs it alike)."""


@dataclass
class _Entry:
    sim: Simulation
    group_size: int  # client group size in use (smaller than the spec's after an OOM)
    ranks: ranks.RankHold | None = None  # the other ranks, for a run with compute.ranks > 1
    notes_logged: int = 0  # the simulation's notes already in the experiment's log

    def log_notes(self, log_line: LogLine, level: str = "info") -> None:
        """Put the simulation's new notes in the log (what compute.compile decided and cost, ...)."""
        for note in self.sim.notes[self.notes_logged :]:
            log_line(level, note)
        self.notes_logged = len(self.sim.notes)

    def close(self) -> None:
        self.release_ranks()
        self.sim.close()

    def release_ranks(self) -> None:
        if self.ranks is not None:
            self.ranks.close()
            self.ranks = None


_cache: OrderedDict[int, _Entry] = OrderedDict()


def train_round(experiment: Experiment, round_number: int, log_line: LogLine) -> tuple[RoundResult, Simulation]:
    """Train ``round_number`` of ``experiment`` on this worker; on CUDA out-of-memory retry it with
    half the client group size (workers.oom). Returns the round's result and the simulation."""

    def run(group_size: int | None) -> tuple[RoundResult, Simulation]:
        entry = _simulation_for(experiment, round_number, log_line, group_size=group_size)
        if ranks.wanted_ranks(entry.sim) == 1:
            entry.release_ranks()
            return entry.sim.next_round(), entry.sim
        if entry.ranks is None:
            entry.ranks = ranks.open_hold(experiment, entry.sim, experiment.worker, log_line)
        if entry.ranks is None:  # none free: one rank (the results are the same)
            return entry.sim.next_round(), entry.sim
        size = entry.ranks.size
        try:
            return ranks.run_round(entry.ranks, entry.sim), entry.sim
        except RankFailure as e:
            entry.ranks = None  # closed by ranks.run_round; the simulation is mid-round: dropped here
            forget(experiment.pk)
            raise RoundAborted(f"Round {round_number} on {size} ranks did not complete: {e}") from e

    result, sim = with_retry(experiment, round_number, log_line, run, forget)
    entry = _cache.get(experiment.pk)
    if entry is not None:
        entry.log_notes(log_line)
    return result, sim


def release_ranks(experiment_id: int) -> None:
    """Let the ranks of ``experiment_id`` go (its next round is not coming to this worker), keeping the
    simulation: a gang's members are free for other work, a worker's own child ranks exit."""
    entry = _cache.get(experiment_id)
    if entry is not None:
        entry.release_ranks()


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
    if entry is not None and group_size is not None:
        entry.close()  # after an out-of-memory error: new trainers, from the published state
        entry = None
    if entry is None or entry.sim.round != want:
        if entry is not None:
            entry.release_ranks()  # they hold the simulation at its old round: a new hold forms if asked
        entry = _switch(experiment, want, entry, log_line, group_size or experiment.client_group_size)
    _cache[experiment.pk] = entry
    while len(_cache) > CACHE_SIZE:
        _, evicted = _cache.popitem(last=False)
        evicted.close()
        _free_memory()
    return entry


def _switch(
    experiment: Experiment, want: int, entry: _Entry | None, log_line: LogLine, group_size: int | None
) -> _Entry:
    """Bring ``entry`` (or a new simulation) to the end of round ``want`` by loading the state that
    round published (workers.state_files); without one, the crash path: replay."""
    started = time.perf_counter()
    builds = data_cache.shared.builds
    state = state_files.read(state_files.state_path(experiment.pk, want), want) if want > 0 else None
    if want > 0 and state is None:
        return _replay(experiment, want, entry, log_line, group_size)
    stale = state is None or (group_size is not None and entry is not None and entry.group_size > group_size)
    if entry is not None and stale:  # round 1 again (a run started over), or smaller groups after an OOM elsewhere
        entry.close()
        entry = None
    if entry is None:
        spec = _spec_of(experiment, state[1]["spec"]) if state else experiment.parsed_spec()
        entry = _build(experiment, spec, log_line, group_size)
    if state is not None:
        try:
            entry.sim.load_state_dict(*state)
        except StateUnavailable as e:  # the per-client state's files are past round want: a checkpoint has it
            log_line("warning", f"Round {want + 1}: {e}")
            entry.close()
            return _replay(experiment, want, None, log_line, group_size)
    data = "data cached" if data_cache.shared.builds == builds else "data built"
    what = f"loaded the state of round {want}" if want > 0 else "built the simulation"
    seconds = time.perf_counter() - started
    log_line("info", f"Round {want + 1} on {experiment.worker or 'this worker'}: {what} in {seconds:.2f} s ({data})")
    return entry


def _spec_of(experiment: Experiment, stored: dict) -> Spec:
    """The spec a round state was written with: the experiment's own, parsed once for the task, unless
    the state's differs (then it is parsed as stored)."""
    return experiment.parsed_spec() if stored == experiment.spec else Spec.from_stored(stored)


def _build(experiment: Experiment, spec: Spec, log_line: LogLine, group_size: int | None) -> _Entry:
    data_cache.shared.resize(settings.FEDWEB_DATA_CACHE_BYTES)  # the operator's bound (the CLI keeps the default)
    compiled.use_cache_dir(settings.FEDWEB_DATA_DIR / compiled.CACHE_FOLDER)  # shared by the machine's workers
    # Built at the group size it will run with: never at the full size first (after an OOM). The
    # per-client state lives with the experiment's files, where every worker finds it.
    sim = Simulation(
        spec, device=ranks.rank0_device(spec), data_root=datasets_root(), client_group_size=group_size,
        client_state_dir=client_state_folder(experiment),
    )  # fmt: skip
    entry = _Entry(sim, sim.spec.compute.client_group_size)
    entry.log_notes(log_line, "warning")  # e.g. a plugin model that trains sequentially, and why
    return entry


def _replay(
    experiment: Experiment, want: int, entry: _Entry | None, log_line: LogLine, group_size: int | None
) -> _Entry:
    """The crash path: round ``want`` published no readable state (its worker died first, or the
    file is torn). Continue from the newest readable origin before it and replay the rounds since."""
    if entry is not None and entry.sim.round <= want and _client_state_at(entry.sim):
        origin = f"the simulation this worker holds at round {entry.sim.round}"
    else:
        if entry is not None:
            entry.close()
        entry, origin = None, "the start"
        for round_number, path in state_files.origins(experiment, want):
            state = state_files.read(path, round_number)
            if state is None:
                continue
            entry = _build(experiment, _spec_of(experiment, state[1]["spec"]), log_line, group_size)
            try:
                entry.sim.load_state_dict(*state)
            except StateUnavailable:  # its per-client state is gone (the files moved past it): older
                entry.close()
                entry = None
                continue
            kind = "state" if path.name.startswith("state-") else "checkpoint"
            origin = f"the {kind} of round {round_number}"
            break
        entry = entry or _build(experiment, experiment.parsed_spec(), log_line, group_size)
    worker = experiment.worker or "this worker"
    log_line(
        "warning",
        f"Round {want + 1} on {worker}: no readable state of round {want}; "
        f"replaying rounds {entry.sim.round + 1}..{want} from {origin}",
    )
    while entry.sim.round < want:
        entry.sim.next_round()  # already recorded: the results are discarded, only the state matters
    return entry


def _client_state_at(sim: Simulation) -> bool:
    """Whether the per-client state's files can still give the round ``sim`` is at (for a replay
    from it): another worker may have moved them past it."""
    try:
        sim.client_states.restore(sim.round)
    except StateUnavailable:
        return False
    return True


def client_state_folder(experiment: Experiment) -> Path:
    """The experiment's per-client state files (fedweb_engine/state/client_rows.py), deleted with it."""
    return checkpoint_folder(experiment.pk) / "client_state"


def forget(experiment_id: int) -> None:
    entry = _cache.pop(experiment_id, None)
    if entry is not None:
        entry.close()
        _free_memory()


def _free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def publish_state(experiment: Experiment, sim: Simulation, log_line: LogLine) -> None:
    """Publish the state after round ``sim.round`` for whichever worker runs the next one. A failed
    write (a full disk) does not fail the round: the next round takes the crash path and replays."""
    try:
        state_files.publish(experiment.pk, sim)
    except OSError as e:
        log_line("warning", f"Could not publish the state of round {sim.round} ({e}); the next round may replay")


def checkpoint_due(round_number: int, total_rounds: int) -> bool:
    return round_number % settings.CHECKPOINT_EVERY == 0 or round_number == total_rounds


def save_checkpoint(experiment: Experiment, sim: Simulation) -> Checkpoint:
    """Write the simulation's state, record it, and keep only the newest few files.

    ``Simulation.save_checkpoint`` writes atomically (fedweb_engine.state.checkpoint): a crash mid-write
    never leaves a truncated file under the name recorded here.
    """
    path = checkpoint_folder(experiment.pk) / f"round-{sim.round:06d}.safetensors"
    size = sim.save_checkpoint(path)
    checkpoint, _ = Checkpoint.objects.update_or_create(
        experiment=experiment, round=sim.round, defaults={"path": str(path), "size_bytes": size}
    )
    for old in experiment.checkpoints.order_by("-round")[settings.CHECKPOINT_KEEP :]:
        Path(old.path).unlink(missing_ok=True)
        shutil.rmtree(snapshot_folder(old.path), ignore_errors=True)  # its client state, if any
        old.delete()
    return checkpoint
