"""Plugin routing with two real Celery workers, real Redis and the real scheduler: one worker
loaded the test plugin (FEDWEB_PLUGINS + PYTHONPATH), the other did not.

The run's spec names the plugin's model (``test_mlp``), so its provenance is recorded by
creation itself, as for a run submitted from the form or the API.
"""

import os

import pytest

from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import LogEntry
from orchestrator.fleet.queues import waiting_status
from orchestrator.fleet.workers import Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.live import wait_for
from tests.plugins.conftest import FIXTURE_DIR

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PLUGIN_ENV = {
    "FEDWEB_PLUGINS": "fedweb_test_plugin",
    "PYTHONPATH": os.pathsep.join(p for p in (str(FIXTURE_DIR), os.environ.get("PYTHONPATH", "")) if p),
}


def _submit(user, provenance, rounds: int = 4) -> Experiment:
    spec = {**TINY_SPEC, "rounds": rounds, "model": {"name": "test_mlp", "options": {"hidden": 8}}}
    e = new_experiment(owner=user, name="needs the plugin", spec=spec)
    assert e.plugins == provenance  # recorded at creation, from the spec
    e.start()
    return e


def _finished(e: Experiment, timeout: float = 120) -> Experiment:
    wait_for(lambda: Experiment.objects.get(pk=e.pk).is_finished, timeout, f"{e} to finish", interval=0.2)
    e.refresh_from_db()
    assert e.status == Status.COMPLETED, e.error
    assert list(e.rounds.values_list("round", flat=True)) == list(range(1, e.total_rounds + 1))  # each once
    return e


def _beats_after(hostname_prefix: str, since, count: int = 2) -> None:
    """Wait until the worker has sent ``count`` heartbeats after ``since`` (each one reconciles and schedules)."""
    seen = set()

    def beaten() -> bool:
        beat = Worker.objects.get(hostname__startswith=hostname_prefix).last_heartbeat
        if beat > since:
            seen.add(beat)
        return len(seen) >= count

    wait_for(beaten, 30, f"{count} heartbeats of {hostname_prefix}", interval=0.1)


def test_rounds_of_a_run_with_a_plugin_run_only_on_the_worker_that_loaded_it(user, workers, test_plugin):
    workers.start_all("plain", "plug", envs={"plug": PLUGIN_ENV})
    plug = Worker.objects.get(hostname__startswith="plug@")
    assert [p["hash"] for p in plug.plugins] == [test_plugin[0]["hash"]]  # its heartbeat reports the same source
    assert Worker.objects.get(hostname__startswith="plain@").plugins == []

    e = _finished(_submit(user, test_plugin))
    assert set(e.rounds.values_list("worker", flat=True)) == {plug.hostname}
    assert not LogEntry.objects.filter(experiment=e, message__contains="lacks plugin").exists()


def test_with_only_a_worker_without_the_plugin_the_run_waits_and_says_why(user, workers, test_plugin):
    from django.utils import timezone

    workers.start("plain")
    e = _submit(user, test_plugin, rounds=2)
    since = timezone.now()
    _beats_after("plain@", since)  # the plain worker reconciled and scheduled twice since
    e.refresh_from_db()
    assert (e.status, e.dispatched_round, e.current_round) == (Status.QUEUED, 0, 0)
    waiting = waiting_status(e.status, e.queue, e.spec, plugins=e.plugins)
    assert waiting["reason"] == f"no worker has plugin fedweb_test_plugin {test_plugin[0]['hash']}"

    workers.start("plug", env=PLUGIN_ENV)  # a worker with it comes: its first heartbeat sends the round
    e = _finished(e)
    assert set(e.rounds.values_list("worker", flat=True)) == {Worker.objects.get(hostname__startswith="plug@").hostname}
