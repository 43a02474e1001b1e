"""What ``compute.compile`` decided, and why, reaches the experiment's log from the worker; the
worker keeps compiled graphs in the data folder's compile cache, shared by the machine's workers."""

import pytest

from fedweb_engine.training import compiled
from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import LogEntry
from tests.conftest import TINY_SPEC
from tests.engine import uncompilable
from tests.factories import new_experiment
from workers.rounds import run_inline

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _cache_folder(monkeypatch, empty_round_cache):
    # The worker points the process at its data folder's cache; put everything back afterwards.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "unset-by-the-worker")
    monkeypatch.setattr(compiled, "_configured", None)


def _run(user, **compute) -> Experiment:
    spec = {**TINY_SPEC, "compute": {**TINY_SPEC["compute"], **compute}}
    experiment = new_experiment(owner=user, name="compiled", spec=spec)
    experiment.start(enqueue=False)
    return run_inline(experiment)


def _log(experiment, contains: str) -> list[tuple[str, str]]:
    rows = LogEntry.objects.filter(experiment=experiment, message__contains=contains).order_by("pk")
    return list(rows.values_list("level", "message"))


def test_the_auto_decision_and_its_figures_reach_the_experiments_log(user, settings):
    e = _run(user)

    assert e.status == Status.COMPLETED
    [(level, message)] = _log(e, "compute.compile auto")
    assert level == "info"
    assert message.startswith("compute.compile auto: not compiling the vectorised step: ~")
    assert "ms eager (measured)" in message and "to build" in message
    assert compiled.cache_folder() == settings.FEDWEB_DATA_DIR / "compile-cache"


def test_a_step_that_cannot_compile_is_logged_once_and_the_run_completes_eagerly(user):
    name = uncompilable.register()
    try:
        spec = {**TINY_SPEC, "model": {"name": name}, "compute": {"device": "cpu", "compile": "on"}}
        e = new_experiment(owner=user, name="uncompilable", spec=spec)
        e.start(enqueue=False)
        e = run_inline(e)
    finally:
        uncompilable.unregister()

    assert e.status == Status.COMPLETED and e.current_round == TINY_SPEC["rounds"]
    assert len(_log(e, "compute.compile on: compiling the vectorised step")) == 1
    [(_, message)] = _log(e, "could not be compiled")
    assert message.startswith(
        "compute.compile: the vectorised step could not be compiled, training eagerly: RuntimeError"
    )
