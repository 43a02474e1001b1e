"""The Python client (clients/python) against a real daphne: rounds arrive once each, through a
server restart, and through the offline journal and ``sync``."""

from __future__ import annotations

import subprocess
import sys

import fedweb_client
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric
from tests import live
from tests.external.conftest import CLIENT_SRC

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def api_token(live_env) -> str:
    user = get_user_model().objects.create_user("carol", password="pw")
    return Token.objects.create(user=user).key


def rounds_of(pk: int) -> list[int]:
    return list(RoundMetric.objects.filter(experiment_id=pk).order_by("round").values_list("round", flat=True))


def test_a_logged_run_appears_with_its_rounds(daphne, api_token, tmp_path):
    run = fedweb_client.init(
        url=f"http://{daphne}", token=api_token, name="from a script", config={"lr": 0.01}, journal=tmp_path / "j.jsonl"
    )
    for r in range(1, 31):
        run.log(r, {"loss": 1 / r, "accuracy": r / 30, "grad/norm": r * 0.5, "bad": float("nan")})
    assert run.finish(timeout=60), run.errors
    experiment = Experiment.objects.get(pk=run.id)
    assert (experiment.kind, experiment.status, experiment.spec) == (Kind.EXTERNAL, Status.COMPLETED, {"lr": 0.01})
    assert rounds_of(run.id) == list(range(1, 31))
    assert CustomMetric.objects.get(experiment_id=run.id, round=4).values == {"grad/norm": 2.0}
    assert any("'bad'" in e for e in run.errors)  # the NaN was dropped, the round kept
    assert not (tmp_path / "j.jsonl").exists()


def test_server_restart_mid_run_loses_no_round(live_env, api_token, tmp_path):
    port = live.free_port()
    server = live.start_daphne(live_env, tmp_path, port, wait=True)
    run = fedweb_client.init(
        url=f"http://127.0.0.1:{port}", token=api_token, name="restart", journal=tmp_path / "j.jsonl",
        flush_interval=0.05, max_backoff=0.5, timeout=2,
    )  # fmt: skip
    for r in range(1, 21):
        run.log(r, {"loss": 1 / r, "step": r})
    live.wait_for(lambda: run.sent == 20, 60, f"the first 20 rounds sent (sent: {run.sent}, errors: {run.errors})")
    server.stop()
    for r in range(21, 61):  # the server is away: log() neither blocks nor raises
        run.log(r, {"loss": 1 / r, "step": r})
    server = live.start_daphne(live_env, tmp_path, port, wait=True)
    try:
        assert run.finish(timeout=120), run.errors
    finally:
        server.stop()
    assert rounds_of(run.id) == list(range(1, 61))
    assert Experiment.objects.get(pk=run.id).status == Status.COMPLETED


def test_offline_journal_then_sync(daphne, api_token, tmp_path):
    journal = tmp_path / "offline.jsonl"
    run = fedweb_client.init(url=f"http://{daphne}", token=api_token, name="offline", offline=True, journal=journal)
    for r in range(1, 11):
        run.log(r, {"loss": 1 / r, "f1": 0.1 * r})
    assert run.finish(timeout=30) is False  # kept locally, not sent
    assert not Experiment.objects.filter(name="offline").exists()
    sync = [sys.executable, "-m", "fedweb_client", "sync", str(journal), "--token", api_token]
    env = {"PYTHONPATH": CLIENT_SRC, "PATH": "/usr/bin:/bin"}
    out = subprocess.run(sync, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    experiment = Experiment.objects.get(name="offline")
    assert rounds_of(experiment.pk) == list(range(1, 11)) and experiment.status == Status.COMPLETED
    again = subprocess.run(sync, capture_output=True, text=True, env=env, timeout=120)  # a second sync: no new run
    assert again.returncode == 0 and "10 already there" in again.stdout, again.stderr
    assert Experiment.objects.filter(name="offline").count() == 1 and len(rounds_of(experiment.pk)) == 10
