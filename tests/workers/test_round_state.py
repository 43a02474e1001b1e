"""The round state in-process: published after every round, loaded by a worker that does not hold
the experiment (no replay), never newer than the round asked for; replay only on the crash path."""

from pathlib import Path

import pytest

from fedweb_engine import Spec
from fedweb_engine.data import cache as data_cache
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.state.checkpoint import read_checkpoint
from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import LogEntry
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.workers.reference import recorded_rounds
from workers import runtime, state_files
from workers.rounds import execute_round

pytestmark = pytest.mark.django_db

# Every kind of state the next round needs: codec residuals (top-k with error feedback), a server
# optimizer's moments (Adam), momentum, and an RNG that every round draws from.
STATEFUL = {
    **TINY_SPEC,
    "rounds": 6,
    "algorithm": {"name": "fedadam", "server_lr": 0.01},
    "communication": {"uplink": "topk", "topk_ratio": 0.1, "downlink": "int8"},
    "local": {"momentum": 0.9},
    "evaluation": {"every": 1},
}
TIMING = {"round_seconds", "train_seconds", "rss_mb", "threads", "vram_allocated_mb", "vram_reserved_mb",
          "vram_peak_mb"}  # fmt: skip


@pytest.fixture(autouse=True)
def _checkpoints(settings, empty_round_cache):
    settings.CHECKPOINT_EVERY, settings.CHECKPOINT_KEEP = 2, 2


def _experiment(user, **changes) -> Experiment:
    e = new_experiment(owner=user, name="stateful", spec={**STATEFUL, **changes})
    e.start(enqueue=False)
    return e


def _run(e: Experiment, rounds, *, fresh_worker: bool) -> None:
    for r in rounds:
        if fresh_worker:
            runtime._cache.clear()  # as if another worker process took the round
        execute_round(e.pk, r, worker=f"w{r}", dispatch=False)


def _messages(e: Experiment, level: str) -> list[str]:
    return list(LogEntry.objects.filter(experiment=e, level=level).values_list("message", flat=True))


@pytest.mark.parametrize("downlink", ["int8", "topk"])  # top-k needs the broadcast weights; int8 does not
def test_a_loaded_state_continues_bit_identically_to_the_simulation_in_memory(user, downlink):
    e = _experiment(user, communication={**STATEFUL["communication"], "downlink": downlink})
    sim = Simulation(e.parsed_spec())
    sim.next_round()
    sim.next_round()
    state_files.publish(e.pk, sim)
    state = state_files.read(state_files.state_path(e.pk, 2), 2)
    loaded = Simulation(Spec.from_stored(state[1]["spec"]))
    loaded.load_state_dict(*state)
    for _ in range(3):
        a, b = sim.next_round().to_dict(), loaded.next_round().to_dict()
        assert {k: v for k, v in a.items() if k not in TIMING} == {k: v for k, v in b.items() if k not in TIMING}
    assert all(sim.global_flat.eq(loaded.global_flat)) and all(sim.residuals.flatten().eq(loaded.residuals.flatten()))
    assert ("received" in read_checkpoint(state_files.state_path(e.pk, 2))[0]) == (downlink == "topk")


def test_a_fresh_worker_loads_the_state_and_replays_nothing(user):
    reference = _experiment(user)
    _run(reference, range(1, 7), fresh_worker=False)
    e = _experiment(user)
    _run(e, range(1, 7), fresh_worker=True)
    e.refresh_from_db()
    assert e.status == Status.COMPLETED and recorded_rounds(e) == recorded_rounds(reference)
    assert _messages(e, "warning") == []
    loads = [m for m in _messages(e, "info") if "loaded the state of round" in m]
    assert len(loads) == 5 and loads[0].startswith("Round 2 on w2: loaded the state of round 1 in ")
    assert loads[0].endswith("s (data cached)")  # the data this process built for round 1
    # Completed: no round state is kept (its final checkpoint is its model; tests/experiments/test_disk.py).
    folder = state_files.state_path(e.pk, 0).parent
    assert sorted(p.name for p in folder.glob("state-*")) == []


def test_a_held_simulation_behind_the_experiment_loads_the_newer_state(user):
    reference = _experiment(user, rounds=5)
    _run(reference, range(1, 6), fresh_worker=False)
    e = _experiment(user, rounds=5)
    _run(e, [1], fresh_worker=False)
    stale = runtime._cache[e.pk]  # this worker held the experiment at round 1 ...
    _run(e, [2, 3], fresh_worker=True)  # ... while another ran rounds 2 and 3
    runtime._cache[e.pk] = stale
    _run(e, [4], fresh_worker=False)
    assert runtime._cache[e.pk] is stale and stale.sim.round == 4  # loaded into it, not rebuilt
    _run(e, [5], fresh_worker=False)
    assert recorded_rounds(e) == recorded_rounds(reference)
    assert any(m.startswith("Round 4 on w4: loaded the state of round 3") for m in _messages(e, "info"))


def test_a_state_written_before_a_crash_is_not_loaded_for_the_round_that_wrote_it(user):
    # The worker of round 3 published state 3 and died before recording round 3: the re-run of
    # round 3 must start from state 2 (kept for exactly this), not from state 3.
    reference = _experiment(user)
    _run(reference, range(1, 7), fresh_worker=False)
    e = _experiment(user)
    _run(e, [1, 2], fresh_worker=False)
    ahead = Simulation(e.parsed_spec())
    ahead.load_state_dict(*state_files.read(state_files.state_path(e.pk, 2), 2))
    ahead.next_round()
    state_files.publish(e.pk, ahead)  # state 3, as the dead worker left it
    _run(e, range(3, 7), fresh_worker=True)
    assert recorded_rounds(e) == recorded_rounds(reference) and _messages(e, "warning") == []


@pytest.mark.parametrize("damage", ["torn", "missing"])
def test_without_a_readable_state_it_replays_from_an_older_one_with_a_warning(user, damage):
    reference = _experiment(user)
    _run(reference, range(1, 7), fresh_worker=False)
    e = _experiment(user)
    _run(e, [1, 2, 3], fresh_worker=False)
    path = state_files.state_path(e.pk, 3)
    if damage == "torn":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a power cut mid-write
    else:
        path.unlink()  # its worker died before writing it
    _run(e, range(4, 7), fresh_worker=True)
    assert recorded_rounds(e) == recorded_rounds(reference)
    assert _messages(e, "warning") == [
        "Round 4 on w4: no readable state of round 3; replaying rounds 3..3 from the state of round 2"
    ]


def test_with_no_state_at_all_it_replays_from_the_newest_checkpoint(user):
    reference = _experiment(user)
    _run(reference, range(1, 7), fresh_worker=False)
    e = _experiment(user)
    _run(e, [1, 2, 3], fresh_worker=False)
    for path in Path(state_files.state_path(e.pk, 0).parent).glob("state-*"):
        path.unlink()
    _run(e, range(4, 7), fresh_worker=True)
    assert recorded_rounds(e) == recorded_rounds(reference)
    assert _messages(e, "warning") == [
        "Round 4 on w4: no readable state of round 3; replaying rounds 3..3 from the checkpoint of round 2"
    ]


def test_workers_bound_the_data_cache_by_the_setting(user, settings):
    settings.FEDWEB_DATA_CACHE_BYTES = 1000  # smaller than any dataset: built for each simulation, never kept
    e = _experiment(user, rounds=2)
    _run(e, [1], fresh_worker=True)
    assert data_cache.shared.max_bytes == 1000 and len(data_cache.shared) == 0
    assert any(m.endswith("(data built)") for m in _messages(e, "info"))
