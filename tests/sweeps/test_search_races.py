"""Two seeds of one configuration reporting the same rung at the same moment, on two workers: the
search's decisions are serialised on the sweep's row, so the configuration is judged once and
neither run is left waiting for the other (run on PostgreSQL by ``make test`` when one answers)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from orchestrator.models import Experiment, RoundMetric
from orchestrator.sweeps import search
from tests.factories import round_result
from tests.sweeps.test_search import _log, _runs, _sweep, _trial

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def test_two_seeds_reporting_at_once_are_judged_once_and_neither_is_left_waiting(user):
    sweep = _sweep(user, lrs=[0.1, 0.05])
    for lr, acc in ((0.05, 0.2), (0.1, 0.6)):
        runs = _runs(sweep, lr)
        for run in runs:
            RoundMetric.record(run, round_result(1, test_accuracy=acc))
        Experiment.objects.filter(pk__in=[r.pk for r in runs]).update(current_round=1, status="running")
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def report(run: Experiment) -> None:
        try:
            barrier.wait(timeout=10)
            search.reported(Experiment.objects.get(pk=run.pk))
        except BaseException as e:  # noqa: BLE001 - shown by the assertion below
            errors.append(e)
        finally:
            connection.close()

    threads = [threading.Thread(target=report, args=(r,)) for lr in (0.1, 0.05) for r in _runs(sweep, lr)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    # Rung 1 judged once for each: top 2/2 = 1 goes on (0.1), the other stops; nobody still waits.
    assert (_trial(sweep, 0.1).state, _trial(sweep, 0.05).state) == ("running", "stopped")
    assert all(r.status != "paused" for r in _runs(sweep, 0.1))
    for run in _runs(sweep, 0.05):
        assert run.status == "paused" and len([m for m in _log(run) if m.startswith("Stopped by the search")]) == 1
    for run in _runs(sweep, 0.1):
        assert len([m for m in _log(run) if m.startswith("Continues past rung 1")]) == 1
