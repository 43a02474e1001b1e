"""The round task in-process, with the real engine on a tiny spec (a round takes well under a second)."""

from pathlib import Path

import pytest
import torch
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from fedweb_engine.simulation.runner import Simulation
from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import Checkpoint, LogEntry
from orchestrator.live import events
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from workers import runtime
from workers.rounds import execute_round, run_inline
from workers.tasks import run_round

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _checkpoints(settings, empty_round_cache):
    settings.CHECKPOINT_EVERY, settings.CHECKPOINT_KEEP = 2, 2


def _experiment(user, **changes) -> Experiment:
    return new_experiment(owner=user, name="tiny", spec={**TINY_SPEC, **changes})


def _inline(experiment) -> Experiment:
    experiment.start(enqueue=False)
    return run_inline(experiment)


def _rounds(experiment) -> list[int]:
    return list(experiment.rounds.order_by("round").values_list("round", flat=True))


def test_it_runs_all_rounds_and_keeps_the_last_checkpoints(user):
    e = _inline(_experiment(user))
    assert e.status == Status.COMPLETED and e.current_round == 5 and e.finished
    assert _rounds(e) == [1, 2, 3, 4, 5]
    assert e.rounds.get(round=5).test_accuracy is not None
    # Every 2 rounds and at the end; completed, it keeps its final one (FEDWEB_FINISHED_CHECKPOINTS_KEEP)
    # and no round state: nothing runs from it again (orchestrator/storage/disk_use.py).
    assert list(Checkpoint.objects.filter(experiment=e).values_list("round", flat=True)) == [5]
    assert all(Path(c.path).exists() and c.size_bytes > 0 for c in e.checkpoints.all())
    folder = Path(e.checkpoints.first().path).parent
    assert sorted(p.name for p in folder.iterdir()) == ["round-000005.safetensors"]


def test_it_enqueues_the_next_round_on_the_experiments_queue(user, enqueued):
    e = _experiment(user)
    e.start()
    run_round.run(e.pk, 1)  # the task body, as a worker would run it
    assert enqueued == [((e.pk, 1), {"queue": "cpu"}), ((e.pk, 2), {"queue": "cpu"})]
    assert Experiment.objects.get(pk=e.pk).status == Status.RUNNING


def test_it_does_nothing_for_duplicate_late_or_unknown_deliveries(user):
    e = _experiment(user)
    e.start(enqueue=False)
    assert execute_round(e.pk, 1, worker="w") is not None
    assert execute_round(e.pk, 1, worker="w") is None  # duplicate
    assert execute_round(e.pk, 3, worker="w") is None  # out of order
    assert execute_round(999999, 1, worker="w") is None  # deleted
    assert _rounds(e) == [1]


def test_it_loads_the_round_state_on_a_fresh_worker_and_matches_an_uninterrupted_run(user, monkeypatch):
    reference = _inline(_experiment(user, rounds=6))
    # Now as if every round ran on a fresh worker: nothing cached, the previous round's state loaded.
    e = _experiment(user, rounds=6)
    e.start(enqueue=False)
    for r in range(1, 7):
        runtime._cache.clear()
        execute_round(e.pk, r, worker=f"w{r}")
    e.refresh_from_db()
    assert e.status == Status.COMPLETED and _rounds(e) == list(range(1, 7))
    got = list(e.rounds.values_list("test_loss", "test_accuracy", "train_loss"))
    want = list(reference.rounds.values_list("test_loss", "test_accuracy", "train_loss"))
    assert got == want
    assert e.log_entries.filter(message__contains="Round 3 on w3: loaded the state of round 2 in").exists()
    assert not e.log_entries.filter(message__contains="replaying").exists()


def test_it_keeps_the_cache_bounded(user):
    for _ in range(3):
        e = _experiment(user, rounds=2)
        e.start(enqueue=False)
        execute_round(e.pk, 1, worker="w")
    assert len(runtime._cache) == runtime.CACHE_SIZE


def _oom_when(monkeypatch, should_fail):
    original = Simulation.next_round
    calls = []

    def next_round(sim):
        calls.append((sim.round + 1, sim.spec.compute.client_group_size))
        if should_fail(sim):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return original(sim)

    monkeypatch.setattr(Simulation, "next_round", next_round)
    return calls


def test_it_retries_a_round_after_oom_with_half_the_client_group_size(user, monkeypatch):
    failed = []

    def once_in_round_3(sim):
        if sim.round == 2 and not failed:
            failed.append(True)
            return True
        return False

    calls = _oom_when(monkeypatch, once_in_round_3)
    e = _inline(_experiment(user))
    assert e.status == Status.COMPLETED and _rounds(e) == [1, 2, 3, 4, 5]
    assert (3, 64) in calls and (3, 32) in calls
    line = e.log_entries.get(level="warning")
    assert line.message == "Out of GPU memory in round 3; retrying with client group size 32"
    reference = _inline(_experiment(user))  # the smaller group gives the same numbers
    assert e.rounds.get(round=5).test_loss == pytest.approx(reference.rounds.get(round=5).test_loss, rel=1e-4)


def test_it_fails_after_repeated_oom_down_to_group_size_one(user, monkeypatch):
    calls = _oom_when(monkeypatch, lambda sim: sim.round == 1)
    e = _inline(_experiment(user))
    assert e.status == Status.FAILED and _rounds(e) == [1]
    assert e.error == "Out of GPU memory in round 2, even with client group size 1"
    assert [size for r, size in calls if r == 2] == [64, 32, 16, 8, 4, 2, 1]
    warnings = list(e.log_entries.filter(level="warning").values_list("message", flat=True))
    assert warnings[-1] == "Out of GPU memory in round 2; retrying with client group size 1"
    assert e.log_entries.filter(level="error", message=e.error).exists()


def test_it_marks_the_experiment_failed_with_a_readable_message(user, monkeypatch):
    def broken(sim):
        raise ValueError("loss is NaN")

    monkeypatch.setattr(Simulation, "next_round", broken)
    e = _inline(_experiment(user))
    assert e.status == Status.FAILED
    assert e.error == "Round 1 failed: ValueError: loss is NaN"
    assert LogEntry.objects.filter(experiment=e, level="error", message=e.error).exists()


def _request_during_round(monkeypatch, round_number, action):
    original = runtime.train_round

    def train_round(experiment, r, log_line):
        out = original(experiment, r, log_line)
        if r == round_number:
            getattr(Experiment.objects.get(pk=experiment.pk), action)(by="alice")
        return out

    monkeypatch.setattr(runtime, "train_round", train_round)
    return original


def test_it_pauses_at_the_round_boundary_and_resumes_without_gaps(user, monkeypatch, enqueued):
    original = _request_during_round(monkeypatch, 2, "pause")
    e = _inline(_experiment(user))
    assert e.status == Status.PAUSED and _rounds(e) == [1, 2]  # the running round is kept
    monkeypatch.setattr(runtime, "train_round", original)
    runtime._cache.clear()  # resume on another worker: from the state of round 2
    assert e.resume()
    assert enqueued == []  # an inline run's rounds are never sent to a broker: run_inline goes on
    e = run_inline(e)
    assert e.status == Status.COMPLETED and _rounds(e) == [1, 2, 3, 4, 5]


def test_it_cancels_at_the_round_boundary(user, monkeypatch):
    _request_during_round(monkeypatch, 3, "cancel")
    e = _inline(_experiment(user))
    assert e.status == Status.CANCELLED and _rounds(e) == [1, 2, 3]
    assert e.pk not in runtime._cache  # memory released


def test_it_publishes_one_round_event_per_round_then_completed(user):
    layer = get_channel_layer()
    e = _experiment(user, rounds=3)
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(e.pk), channel)
    _inline(e)
    received = []
    while True:
        try:
            received.append(async_to_sync(layer.receive)(channel))
        except Exception:
            break
        if received[-1]["type"] == "status" and received[-1]["status"] == "completed":
            break
    rounds = [m["round"] for m in received if m["type"] == "round"]
    assert rounds == [1, 2, 3]
    assert received[-1]["type"] == "status" and received[-1]["current_round"] == 3
    assert {m["type"] for m in received} == {"round", "status", "log"}


def test_it_keeps_the_smaller_group_size_after_oom_when_rebuilt_elsewhere(user, monkeypatch):
    failed = []
    calls = _oom_when(monkeypatch, lambda sim: sim.round == 1 and not failed and not failed.append(True))
    e = _experiment(user)
    e.start(enqueue=False)
    execute_round(e.pk, 1, worker="w1", dispatch=False)
    execute_round(e.pk, 2, worker="w1", dispatch=False)  # OOM once, retried with 32
    assert Experiment.objects.get(pk=e.pk).client_group_size == 32
    runtime._cache.clear()  # the next round runs on a fresh worker: from the state of round 2
    execute_round(e.pk, 3, worker="w2", dispatch=False)
    assert calls[-1] == (3, 32)


def test_it_deletes_the_checkpoint_files_with_the_experiment(user, django_capture_on_commit_callbacks):
    e = _inline(_experiment(user))
    folder = Path(e.latest_checkpoint().path).parent
    assert any(folder.iterdir())
    with django_capture_on_commit_callbacks(execute=True):
        e.delete()
    assert not folder.exists()


class _Branchy(torch.nn.Module):
    """A plugin's model with data-dependent control flow (an ``if`` on a tensor): vmap cannot run it."""

    def __init__(self, features: int, classes: int):
        super().__init__()
        self.fc = torch.nn.Linear(features, classes)

    def forward(self, x):
        h = self.fc(x.flatten(1))
        return h * 0.5 if h.sum() > 0 else h


def test_a_plugin_model_that_cannot_be_vectorised_trains_sequentially_and_the_log_says_why(user):
    from fedweb_engine.components import registry

    registry.model("branchy_task_test")(lambda shape, classes, options: _Branchy(64, classes))
    try:
        spec_model = {"name": "branchy_task_test", "options": {}}
        e = _inline(_experiment(user, model=spec_model, compute={"device": "cpu", "training": "auto"}))
    finally:
        registry.unregister("model", "branchy_task_test")
    assert e.status == Status.COMPLETED and _rounds(e) == [1, 2, 3, 4, 5]
    [note] = LogEntry.objects.filter(experiment=e, message__startswith="training sequentially")
    assert note.level == "warning"
    assert "model branchy_task_test cannot be vectorised: RuntimeError" in note.message
