"""Experiments moving between real Celery workers (real Redis, the real scheduler): a worker that
does not hold an experiment at the right round loads the round state the previous round published,
on data it keeps loaded; rounds are never replayed except after a crash, and every round equals
the experiment run alone."""

import os
import signal

import pytest

from orchestrator.models import Experiment, LogEntry, RoundMetric, Status
from orchestrator.sweeps.create import create_sweep
from tests.conftest import TINY_SPEC
from tests.live import wait_for
from tests.workers.reference import recorded_rounds, reference_rounds

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = {**TINY_SPEC, "rounds": 30, "evaluation": {"every": 5}}


def _submit(user, count: int, **spec) -> list[Experiment]:
    experiments = []
    for i in range(count):
        e = Experiment.objects.create(owner=user, name=f"switch {i}", spec={**SPEC, "seed": 3 + i, **spec})
        e.start()
        experiments.append(e)
    return experiments


def _all_finished(experiments, timeout=600) -> None:
    def finished():
        states = [Experiment.objects.get(pk=e.pk) for e in experiments]
        return all(s.is_finished for s in states) or None

    try:
        wait_for(finished, timeout, "every experiment to finish", interval=0.2)
    except TimeoutError:
        rounds = {e.pk: Experiment.objects.get(pk=e.pk).current_round for e in experiments}
        raise TimeoutError(f"not finished after {timeout}s; rounds recorded: {rounds}") from None
    for e in experiments:
        e.refresh_from_db()
        assert e.status == Status.COMPLETED, e.error


def _assert_identical_and_once(experiments) -> None:
    for e in experiments:
        assert list(e.rounds.order_by("round").values_list("round", flat=True)) == list(range(1, e.total_rounds + 1))
        assert recorded_rounds(e) == reference_rounds(e.spec), e.name


def _log(experiments, level: str, contains: str) -> list[str]:
    return list(
        LogEntry.objects.filter(experiment__in=experiments, level=level, message__contains=contains).values_list(
            "message", flat=True
        )
    )


@pytest.mark.parametrize("policy", ["fifo", "srtf", "fair"])
def test_experiments_move_between_two_workers_without_replaying_a_round(user, workers, settings, policy):
    settings.FEDWEB_POLICY = {"cpu": policy}  # this process schedules on start, the workers after rounds
    env = {"FEDWEB_POLICY": f"cpu={policy}"}
    procs = workers.start_all("w1", "w2", env=env)
    # Alone, one move is made on purpose after round 3 (below): 10 rounds leave 7 after it to compare with
    # the run alone. Together, 30 rounds each: there the policy's own interleaving makes the moves.
    alone = _submit(user, 1, rounds=10)

    # A move that does not depend on how the policy and affinity happen to interleave the runs: the
    # worker holding the first run shuts down warmly after its third round (Celery finishes the round it
    # runs); the next round, sent to that worker's own queue, is sent again and the other worker
    # continues from the published state.
    def holder_after_round_3():
        e = Experiment.objects.get(pk=alone[0].pk)
        return e.worker if e.current_round >= 3 and e.worker else None

    name = wait_for(holder_after_round_3, 120, "the first run's holder after round 3", interval=0.02).split("@")[0]
    os.kill(procs[name].proc.pid, signal.SIGTERM)  # Celery's main process only: a warm shutdown, not a crash
    _all_finished(alone)
    workers.start(name, env=env)  # back under its name for the three runs together
    together = _submit(user, 3)
    _all_finished(together)
    everything = alone + together
    _assert_identical_and_once(everything)
    assert _log(everything, "warning", "replaying") == []
    # It really switched: both workers ran rounds, and some experiment continued on a worker
    # that did not hold it (a state load), or ran on both.
    ran_on = {e.pk: set(RoundMetric.objects.filter(experiment=e).values_list("worker", flat=True)) for e in everything}
    assert {w.split("@")[0] for hosts in ran_on.values() for w in hosts} == {"w1", "w2"}
    loads = _log(everything, "info", "loaded the state of round")
    assert loads and len(ran_on[alone[0].pk]) == 2, (loads, ran_on)
    assert all(" on w1@" in m or " on w2@" in m for m in loads)


def test_a_worker_killed_during_a_run_of_three_experiments_changes_no_result(user, workers):
    first = workers.start_all("w1", "w2")["w1"]
    experiments = _submit(user, 3, rounds=20)

    def progressed():
        return sum(Experiment.objects.get(pk=e.pk).current_round for e in experiments) >= 15

    wait_for(progressed, 300, "15 rounds recorded in all", interval=0.05)
    first.kill9()  # whatever it held (a round, maybe half-published state) dies with it
    workers.start("w3")
    _all_finished(experiments)
    _assert_identical_and_once(experiments)


def test_a_sweep_of_six_runs_on_one_worker_builds_its_dataset_once(user, workers):
    workers.start("w1")
    sweep = create_sweep(
        owner=user, name="lr", base={**SPEC, "rounds": 3}, axes={"local.lr": [0.01, 0.02, 0.05, 0.1, 0.2, 0.3]}
    )
    runs = list(sweep.experiments.all())
    assert len(runs) == 6
    _all_finished(runs)
    built = _log(runs, "info", "(data built)")
    assert len(built) == 1, built
    assert len(_log(runs, "info", "(data cached)")) >= 5  # every other run's first round, at least
