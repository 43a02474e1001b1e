"""The public read-only link shows the run, never the machines it ran on (orchestrator/experiments/public.py)."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.public import redact
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.workers import Worker
from orchestrator.live import events
from orchestrator.sockets.consumers import ExperimentConsumer
from tests.accounts.world import make_experiment, make_user

HOST, MACHINE = "gpu0@secret-box", "secret-box"


@pytest.fixture
def public_run(db):
    experiment = make_experiment(make_user("olivia"), visibility="public", rounds=3)
    Worker.objects.create(hostname=HOST, queue="gpu")
    Worker.objects.create(hostname="cpu1@other-host", queue="cpu")
    Experiment.objects.filter(pk=experiment.pk).update(
        worker=HOST, status="failed", error=f"Round 3 failed: {MACHINE} ran out of memory"
    )
    RoundMetric.objects.filter(experiment=experiment).update(worker=HOST)  # the rounds table's Worker column
    experiment.refresh_from_db()
    experiment.log("info", f"Running round 1 on {HOST}")
    experiment.log("warning", "Round 2 moved from cpu1@other-host to another machine")
    return experiment


def test_it_names_no_worker_host_on_the_share_page_or_its_downloads(client, public_run):
    token = public_run.share_token
    page = client.get(f"/share/{token}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Running round 1 on a worker" in html and "Round 3 failed: a worker ran out of memory" in html
    downloads = [
        f"/experiments/{public_run.pk}/{name}?token={token}" for name in ("rounds.csv", "rounds.json", "report.html")
    ]
    for url in [f"/share/{token}/", *downloads]:
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response) if response.streaming else response.content
        for name in (HOST, MACHINE, "other-host"):
            assert name.encode() not in body, f"{name} in {url}"


def test_it_still_names_the_worker_to_signed_in_team_members(client, public_run):
    client.force_login(public_run.owner)
    html = client.get(f"/experiments/{public_run.pk}/").content.decode()
    assert HOST in html and f"Running round 1 on {HOST}" in html
    assert HOST in client.get(f"/experiments/{public_run.pk}/report.html").content.decode()


@pytest.mark.django_db(transaction=True)
def test_it_redacts_live_log_lines_on_a_public_link_socket(public_run):
    async def scenario():
        path = f"/ws/experiments/{public_run.pk}/?token={public_run.share_token}"
        ws = WebsocketCommunicator(ExperimentConsumer.as_asgi(), path)
        ws.scope["user"] = AnonymousUser()
        ws.scope["url_route"] = {"kwargs": {"experiment_id": public_run.pk}}
        assert (await ws.connect())[0]
        while not await ws.receive_nothing(timeout=0.2):
            await ws.receive_json_from()  # history and status
        layer = events.get_channel_layer()
        event = {"type": "log", "experiment_id": public_run.pk, "time": "2025-01-01T00:00:00+00:00",
                 "level": "info", "message": f"Running round 4 on {HOST}"}  # fmt: skip
        await layer.group_send(events.group_name(public_run.pk), event)
        received = await ws.receive_json_from(timeout=2)
        await ws.disconnect()
        return received

    assert async_to_sync(scenario)()["message"] == "Running round 4 on a worker"


@pytest.mark.django_db(transaction=True)
def test_it_sends_status_events_without_the_worker_on_a_public_link_socket(public_run):
    async def statuses(path: str, user) -> list[dict]:
        ws = WebsocketCommunicator(ExperimentConsumer.as_asgi(), path)
        ws.scope["user"] = user
        ws.scope["url_route"] = {"kwargs": {"experiment_id": public_run.pk}}
        assert (await ws.connect())[0]
        received = []
        while not await ws.receive_nothing(timeout=0.2):
            received.append(await ws.receive_json_from())
        await ws.disconnect()
        return [m for m in received if m["type"] == "status"]

    public = async_to_sync(statuses)(
        f"/ws/experiments/{public_run.pk}/?token={public_run.share_token}", AnonymousUser()
    )
    owner = async_to_sync(statuses)(f"/ws/experiments/{public_run.pk}/", public_run.owner)
    assert owner[0]["worker"] == HOST and MACHINE in owner[0]["error"]  # what the status line shows
    assert public[0]["worker"] == "" and public[0]["error"] == "Round 3 failed: a worker ran out of memory"
    assert public[0]["status"] == "failed" and public[0]["finished"] == owner[0]["finished"]


def test_it_replaces_whole_host_names_only_and_never_rewrites_its_own_replacement():
    names = ["gpu0@box7", "box7"]
    assert redact("Running round 3 on gpu0@box7.", names) == "Running round 3 on a worker."
    assert redact("box7 is out of memory; box70 and mybox7 are other words", names) == (
        "a worker is out of memory; box70 and mybox7 are other words"
    )
