"""Rounds on real Celery workers (subprocesses) through a real Redis, sharing the test database."""

from pathlib import Path

import pytest
import torch

from fedweb_engine.simulation.runner import Simulation
from orchestrator.models import Experiment, Status, Worker
from tests.conftest import TINY_SPEC
from tests.live import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

# Rounds slow enough (~0.5-1 s) to act in the middle of one; still tiny. Six rounds leave each test
# rounds after the one it acts in (a kill in round 3, a pause at round 2 or 3) for the run to go on with.
SLOW_ROUNDS = 6
SLOW_SPEC = {**TINY_SPEC, "rounds": SLOW_ROUNDS, "local": {"epochs": 60}}


def _state(experiment) -> str:
    experiment.refresh_from_db()
    e = experiment
    return f"status {e.status}, round {e.current_round}, claimed {e.claimed_round} by {e.worker or 'nobody'}"


def _status_becomes(experiment, statuses, timeout=120):
    def check():
        experiment.refresh_from_db()
        return experiment.status in statuses

    wait_for(check, timeout, f"experiment {experiment.pk} to become {statuses}", 0.05, lambda: _state(experiment))


def _round_reaches(experiment, n, timeout=120):
    def check():
        experiment.refresh_from_db()
        return experiment.current_round >= n

    wait_for(check, timeout, f"experiment {experiment.pk} to reach round {n}", 0.02, lambda: _state(experiment))


def _claimed_by(experiment, round_number: int, worker: str, timeout=120):
    def check():
        experiment.refresh_from_db()
        e = experiment
        return e.claimed_round == round_number and e.round_in_flight() and e.worker.startswith(f"{worker}@")

    what = f"round {round_number} to be claimed by {worker}"
    wait_for(check, timeout, what, 0.02, lambda: _state(experiment))


def _settled(experiment, timeout=120):
    """The round in flight (if any) has ended: the lease is released or the round recorded."""

    def check():
        experiment.refresh_from_db()
        return not experiment.round_in_flight()

    wait_for(check, timeout, f"experiment {experiment.pk} to hold no round", 0.05, lambda: _state(experiment))


def _barrier(user, timeout=120):
    """Run a tiny experiment to the end on the same single worker: any round of an earlier experiment
    already sent to the worker's queue has been taken by then (the worker takes its messages in order)."""
    probe = Experiment.objects.create(owner=user, name="barrier", spec={**TINY_SPEC, "rounds": 2})
    assert probe.start()
    _status_becomes(probe, [Status.COMPLETED, Status.FAILED], timeout)


def _rounds(experiment):
    return list(experiment.rounds.order_by("round").values_list("round", flat=True))


def test_it_completes_a_5_round_experiment_on_a_worker(user, workers):
    workers.start("w1")
    e = Experiment.objects.create(owner=user, name="five", spec=TINY_SPEC)
    assert e.start()
    _status_becomes(e, [Status.COMPLETED, Status.FAILED])
    assert e.status == Status.COMPLETED, e.error
    assert _rounds(e) == [1, 2, 3, 4, 5]
    checkpoint = e.latest_checkpoint()
    assert checkpoint.round == 5 and Path(checkpoint.path).is_file() and checkpoint.size_bytes > 0
    worker = Worker.objects.get(hostname__startswith="w1@")
    assert worker.queue == "cpu" and worker.devices == [] and not worker.is_lost
    assert e.worker == worker.hostname


@pytest.mark.slow
def test_it_recovers_from_a_worker_killed_during_round_3(user, workers):
    first = workers.start("w1")
    e = Experiment.objects.create(owner=user, name="crash", spec=SLOW_SPEC)
    e.start()
    _claimed_by(e, 3, "w1")  # round 3 is now running on w1
    first.kill9()
    e.refresh_from_db()
    assert e.current_round == 2 and e.status == Status.RUNNING  # round 3 died with the worker

    workers.start("w2")  # its heartbeat re-sends round 3 once w1's lease runs out (WORKER_LOST_AFTER)
    _status_becomes(e, [Status.COMPLETED, Status.FAILED], timeout=180)
    assert e.status == Status.COMPLETED, e.error
    assert _rounds(e) == list(range(1, SLOW_ROUNDS + 1))  # exactly once each (unique per round, and no gap)
    assert e.worker.startswith("w2@")

    final = e.rounds.get(round=SLOW_ROUNDS)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the worker (OMP_NUM_THREADS=1): same arithmetic order
    try:
        sim = Simulation(e.parsed_spec())
        reference = [sim.next_round() for _ in range(SLOW_ROUNDS)][-1]
    finally:
        torch.set_num_threads(threads)
    assert (final.test_loss, final.test_accuracy) == (reference.test_loss, reference.test_accuracy)


@pytest.mark.slow
def test_it_cancels_pauses_and_resumes_at_round_boundaries(user, workers):
    workers.start("w1")
    doomed = Experiment.objects.create(owner=user, name="cancel me", spec=SLOW_SPEC)
    doomed.start()
    _round_reaches(doomed, 2)
    assert doomed.cancel(by="alice")
    at_cancel = doomed.current_round
    _settled(doomed)
    _barrier(user)  # had another round of it been sent, the worker would have taken it by now
    doomed.refresh_from_db()
    assert doomed.status == Status.CANCELLED
    assert doomed.current_round <= at_cancel + 1  # the round in flight finishes, no more

    e = Experiment.objects.create(owner=user, name="pause me", spec=SLOW_SPEC)
    e.start()
    _round_reaches(e, 2)
    assert e.pause(by="alice")
    assert e.status == Status.PAUSED
    at_pause = e.current_round
    _settled(e)
    _barrier(user)
    e.refresh_from_db()
    assert e.status == Status.PAUSED and e.current_round <= at_pause + 1
    paused_at = e.current_round
    assert paused_at < SLOW_ROUNDS  # rounds are left for the resume to run

    assert e.resume(by="alice")
    _status_becomes(e, [Status.COMPLETED, Status.FAILED])
    assert e.status == Status.COMPLETED, e.error
    assert _rounds(e) == list(range(1, SLOW_ROUNDS + 1))
    assert e.log_entries.filter(message=f"Resumed at round {paused_at + 1} by alice").exists()
