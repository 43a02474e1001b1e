"""Per-client state across workers, in-process: each round on a fresh worker, a round re-run after
its worker died between committing and recording, a replay from a checkpoint, and a stale held
simulation, all give the rounds (and client rows) of the run left alone."""

from pathlib import Path

import pytest
import torch

from fedweb_engine.simulation.runner import Simulation
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import LogEntry
from tests.conftest import TINY_SPEC
from tests.engine import client_state_toy
from tests.factories import new_experiment
from tests.workers.reference import recorded_rounds
from workers import runtime, state_files
from workers.tasks import execute_round

pytestmark = pytest.mark.django_db
SPEC = {**TINY_SPEC, "rounds": 5, "participation": {"clients_per_round": 6}}


@pytest.fixture(autouse=True)
def _toy(monkeypatch, settings, empty_round_cache):
    settings.CHECKPOINT_EVERY, settings.CHECKPOINT_KEEP = 2, 2
    client_state_toy.install(monkeypatch)


def _experiment(user) -> Experiment:
    e = new_experiment(owner=user, name="client state", spec=SPEC)
    e.start(enqueue=False)
    return e


def _run(e: Experiment, rounds, *, fresh_worker: bool = True) -> None:
    for r in rounds:
        if fresh_worker:
            runtime._cache.clear()  # as if another worker process took the round
        execute_round(e.pk, r, worker=f"w{r}", dispatch=False)


def _warnings(e: Experiment) -> list[str]:
    return list(LogEntry.objects.filter(experiment=e, level="warning").values_list("message", flat=True))


def _rows(e: Experiment) -> torch.Tensor:
    # A completed run keeps its final checkpoint (and the client rows beside it), not its round states.
    sim = Simulation(e.parsed_spec(), client_state_dir=runtime.client_state_folder(e))
    state = state_files.read(Path(e.latest_checkpoint().path), SPEC["rounds"])
    sim.load_state_dict(*state)
    return client_state_toy.rows(sim)


@pytest.fixture
def reference(user):
    e = _experiment(user)
    _run(e, range(1, 6), fresh_worker=False)
    return recorded_rounds(e), _rows(e)


def test_a_fresh_worker_every_round_continues_the_client_state_exactly(user, reference):
    e = _experiment(user)
    _run(e, range(1, 6))
    # Completed: the live rows are gone (nothing runs from it again); they live on beside the final checkpoint.
    assert not runtime.client_state_folder(e).exists()
    snapshot = Path(e.latest_checkpoint().path).with_suffix(".clients")
    assert sorted(p.name for p in snapshot.iterdir()) and e.latest_checkpoint().round == 5
    assert (recorded_rounds(e), _warnings(e)) == (reference[0], [])
    assert torch.equal(_rows(e), reference[1]) and reference[1].abs().sum() > 0


def test_a_round_rerun_after_its_worker_died_between_commit_and_record_is_exact(user, reference):
    e = _experiment(user)
    _run(e, [1, 2])
    dead = Simulation(e.parsed_spec(), client_state_dir=runtime.client_state_folder(e))
    dead.load_state_dict(*state_files.read(state_files.state_path(e.pk, 2), 2))
    dead.next_round()  # round 3's rows committed (journal 3) and state 3 published, never recorded
    state_files.publish(e.pk, dead)
    del dead
    _run(e, range(3, 6))
    assert (recorded_rounds(e), _warnings(e)) == (reference[0], [])
    assert torch.equal(_rows(e), reference[1])


def test_without_round_states_it_replays_from_the_checkpoint_and_its_client_state(user, reference):
    e = _experiment(user)
    _run(e, [1, 2, 3])
    for path in Path(state_files.state_path(e.pk, 0).parent).glob("state-*"):
        path.unlink()
    _run(e, [4, 5])
    assert recorded_rounds(e) == reference[0] and torch.equal(_rows(e), reference[1])
    assert _warnings(e) == [
        "Round 4 on w4: no readable state of round 3; replaying rounds 3..3 from the checkpoint of round 2"
    ]


def test_a_held_simulation_whose_client_state_moved_on_is_not_replayed_from(user, reference, settings):
    settings.CHECKPOINT_EVERY = 10  # no checkpoint of round 4 to fall back on: the state of round 3
    e = _experiment(user)
    _run(e, [1], fresh_worker=False)
    stale = runtime._cache[e.pk]  # this worker held the experiment at round 1 ...
    _run(e, [2, 3, 4])  # ... while others ran rounds 2-4 (the client rows' base is at round 3)
    state_files.state_path(e.pk, 4).unlink()  # and round 4's worker died before publishing
    runtime._cache[e.pk] = stale
    _run(e, [5], fresh_worker=False)
    assert recorded_rounds(e) == reference[0] and torch.equal(_rows(e), reference[1])
    assert _warnings(e) == [
        "Round 5 on w5: no readable state of round 4; replaying rounds 4..4 from the state of round 3"
    ]
