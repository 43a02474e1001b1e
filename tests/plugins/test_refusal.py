"""The round task checks the run's recorded plugins against its own before claiming: a worker
that lacks one (or has other source) refuses with a log line, claims nothing and hands the round
back to the scheduler; one that has them runs it. In-process, with the real engine."""

import pytest

from orchestrator.models import Experiment, LogEntry, Status, Worker
from tests.conftest import TINY_SPEC
from tests.plugins.conftest import HAS_IT, RECORDED
from workers.rounds import execute_round

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_round_cache")]


def _started(user, plugins) -> Experiment:
    e = Experiment.objects.create(owner=user, name="needs a plugin", spec=TINY_SPEC)
    Experiment.objects.filter(pk=e.pk).update(plugins=plugins)
    e.refresh_from_db()
    e.start()
    e.refresh_from_db()
    return e


def test_a_worker_without_the_plugin_refuses_the_round_without_claiming_it(user, enqueued):
    Worker.objects.create(hostname="w1@h", queue="cpu", plugins=HAS_IT)  # a stale heartbeat: it has it no more
    e = _started(user, RECORDED)
    assert e.dispatched_to == "w1@h"
    assert execute_round(e.pk, 1, worker="w1@h") is None
    e.refresh_from_db()
    assert (e.status, e.claimed_round, e.current_round, e.worker) == (Status.QUEUED, 0, 0, "")
    assert e.dispatched_round == 0  # ready again: sent anew to a worker that has it
    assert not e.rounds.exists()
    line = LogEntry.objects.filter(experiment=e, level="warning").values_list("message", flat=True).get()
    assert line.startswith("worker w1@h lacks plugin fedweb_test_plugin 1.2.0 (hash abc)")
    assert Worker.objects.get(hostname="w1@h").plugins == []  # so the scheduler does not pick it again
    assert len(enqueued) == 1  # not sent back to it


def test_the_refused_round_goes_to_a_worker_that_has_the_plugin(user, enqueued):
    Worker.objects.create(hostname="w1@h", queue="cpu", plugins=HAS_IT)
    e = _started(user, RECORDED)
    Worker.objects.create(hostname="w2@h", queue="cpu", plugins=HAS_IT)
    execute_round(e.pk, 1, worker="w1@h")  # schedules the queue afterwards, as after any round task
    assert [kw["queue"].name for _, kw in enqueued] == ["w1@h.dq2", "w2@h.dq2"]
    assert [args for args, _ in enqueued] == [(e.pk, 1), (e.pk, 1)]


def test_a_worker_with_the_plugins_other_source_refuses_and_says_which_it_has(user, enqueued, test_plugin):
    recorded = [{**test_plugin[0], "hash": "0123456789abcdef"}]
    e = _started(user, recorded)
    execute_round(e.pk, 1, worker="w1@h")
    e.refresh_from_db()
    assert e.claimed_round == 0
    line = LogEntry.objects.filter(experiment=e, level="warning").values_list("message", flat=True).get()
    assert "lacks plugin fedweb_test_plugin 0123456789abcdef (hash 0123456789abcdef); it has " in line
    assert test_plugin[0]["hash"] in line


def test_a_worker_with_the_plugin_at_the_recorded_hash_runs_the_round(user, enqueued, test_plugin):
    e = _started(user, test_plugin)
    assert execute_round(e.pk, 1, worker="w1@h") is not None
    e.refresh_from_db()
    assert (e.current_round, e.worker) == (1, "w1@h")
    assert e.rounds.get(round=1).worker == "w1@h"  # each round records who ran it
    assert not LogEntry.objects.filter(experiment=e, level="warning").exists()


def test_a_late_copy_of_a_recorded_round_is_not_reported_as_a_missing_plugin(user, enqueued):
    e = _started(user, RECORDED)
    Experiment.objects.filter(pk=e.pk).update(current_round=1, dispatched_round=1)
    assert execute_round(e.pk, 1, worker="w1@h") is None
    assert not LogEntry.objects.filter(experiment=e, level="warning").exists()
