"""A sweep after its creation (issue 21): its own socket tells the page which run changed, checking
access at connect and on every event (closed with 4403 once access is gone); its sharing page
applies team and visibility to its runs; its live JSON and its link to the compare view."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import reverse

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.live import events
from orchestrator.sockets.sweeps import SweepConsumer
from orchestrator.sweeps import search
from orchestrator.sweeps.create import create_sweep
from orchestrator.sweeps.models import Sweep
from orchestrator.web.views.sweep_sharing import apply_sharing
from tests.accounts.world import PASSWORD, fast_password_hashing, make_world, metrics  # noqa: F401
from tests.conftest import TINY_SPEC

CLOSED = {"type": "websocket.close", "code": 4403}
BASE = {**TINY_SPEC, "algorithm": {"name": "fedprox"}}


@pytest.fixture
def world(enqueued):
    w = make_world()
    w.sweep = create_sweep(owner=w.owner, name="mu", base=BASE, axes={"algorithm.mu": [0, 1], "seed": [0, 1]},
                           team=w.team, visibility="team")  # fmt: skip
    return w


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def _open(sweep: Sweep, user) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(SweepConsumer.as_asgi(), f"/ws/sweeps/{sweep.pk}/")
    ws.scope["user"] = user
    ws.scope["url_route"] = {"kwargs": {"sweep_id": sweep.pk}}
    assert (await ws.connect())[0]
    return ws


async def _send(experiment_id: int, event: dict) -> None:
    await events.get_channel_layer().group_send(events.group_name(experiment_id), event)


@pytest.mark.django_db(transaction=True)
def test_it_tells_a_viewer_which_run_changed_until_the_sweep_is_no_longer_shared(world):
    run = world.sweep.experiments.order_by("pk").first()

    async def scenario():
        ws = await _open(world.sweep, world.viewer)
        assert await ws.receive_json_from(timeout=2) == {
            "type": "sweep_changed", "sweep_id": world.sweep.pk, "experiment_id": None, "change": "connected"}  # fmt: skip
        await _send(run.pk, events.round_event(run.pk, metrics(1)))
        assert (await ws.receive_json_from(timeout=2))["experiment_id"] == run.pk
        await _send(run.pk, await sync_to_async(events.status_event)(run))
        assert (await ws.receive_json_from(timeout=2))["change"] == "status"
        await _send(run.pk, {"type": "rounds", "experiment_id": run.pk})  # a type it has no handler for
        assert (await ws.receive_json_from(timeout=2))["change"] == "round"

        # The owner makes the sweep private: its runs are saved, their access events reach the socket.
        await sync_to_async(apply_sharing)(world.sweep, None, "private")
        assert await ws.receive_output(timeout=2) == CLOSED
        await _send(run.pk, events.round_event(run.pk, metrics(2)))
        assert await ws.receive_nothing(timeout=0.2)  # nothing forwarded after the close

    async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
def test_it_refuses_a_user_who_may_not_view_the_sweep(world):
    async def scenario():
        ws = await _open(world.sweep, world.other)
        assert await ws.receive_output(timeout=2) == CLOSED

    async_to_sync(scenario)()


@pytest.mark.django_db
def test_it_shares_a_sweep_and_its_runs_from_its_sharing_page(world):
    url = reverse("sweep_sharing", args=[world.sweep.pk])
    assert _client(world.member).get(url).status_code == 403  # members control runs; owners share
    owner = _client(world.owner)
    assert owner.get(url).status_code == 200
    bad = owner.post(url, {"team": "", "visibility": "team"})
    assert bad.status_code == 400 and "Choose a team" in " ".join(bad.context["form"].errors["visibility"])
    world.sweep.refresh_from_db()
    assert world.sweep.visibility == "team"  # nothing changed by the refused form

    one = world.sweep.experiments.first()
    one.enable_public_link()  # a run shared on its own keeps its link while the sweep stays with the team
    assert owner.post(url, {"team": world.team.pk, "visibility": "team"}).status_code == 302
    assert Experiment.objects.get(pk=one.pk).visibility == "public"
    assert owner.post(url, {"team": "", "visibility": "private"}).status_code == 302
    assert set(world.sweep.experiments.values_list("visibility", flat=True)) == {"private"}
    assert _client(world.viewer).get(reverse("sweep_detail", args=[world.sweep.pk])).status_code == 404


@pytest.mark.django_db
def test_it_links_to_its_compare_view_and_answers_its_live_json(world):
    ids = ",".join(str(pk) for pk in world.sweep.experiments.order_by("pk").values_list("pk", flat=True))
    page = _client(world.viewer).get(reverse("sweep_detail", args=[world.sweep.pk])).content.decode()
    assert f'href="/compare/?ids={ids}&amp;group=1"' in page and f"/ws/sweeps/{world.sweep.pk}/" in page
    assert "/sharing/" not in page  # a viewer may not change the sharing

    for e in world.sweep.experiments.all():
        RoundMetric.record(e, metrics(1))
    body = _client(world.viewer).get(reverse("sweep_live", args=[world.sweep.pk])).json()
    assert body["progress"].count("of 4 runs finished") == 1 and body["rows"].count("<tr") == 2
    assert set(body["figures"]) == {"sweep-test_accuracy", "sweep-test_loss"}  # parcoords: completed runs only
    Experiment.objects.filter(pk=world.sweep.experiments.first().pk).update(status="completed")
    body = _client(world.viewer).get(reverse("sweep_live", args=[world.sweep.pk])).json()
    assert set(body["figures"]) == {"sweep-test_accuracy", "sweep-test_loss", "sweep-parallel"}
    assert "1 of 2 in the figures" in body["rows"]
    assert _client(world.other).get(reverse("sweep_live", args=[world.sweep.pk])).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_a_search_s_decision_reaches_the_socket_which_then_hears_the_runs_created_since(world):
    tpe = create_sweep(owner=world.owner, name="tpe", base={**TINY_SPEC, "algorithm": {"client": {"name": "fedprox"}}}, axes={"seed": [0]}, mode="tpe",
                       search={"budget": 3, "ranges": {"local.lr": {"low": 0.01, "high": 0.1, "log": True}}},
                       team=world.team, visibility="team")  # fmt: skip
    first = tpe.experiments.get()

    async def scenario():
        ws = await _open(tpe, world.viewer)
        assert (await ws.receive_json_from(timeout=2))["change"] == "connected"
        # The first configuration ends; the search makes the next one, whose run this socket never saw.
        await sync_to_async(_complete)(first)
        changes = {(m["change"], m["experiment_id"]) for m in await _drain(ws)}
        assert ("search", None) in changes
        newer = await sync_to_async(lambda: tpe.experiments.exclude(pk=first.pk).get())()
        await _send(newer.pk, events.round_event(newer.pk, metrics(1)))
        assert (await ws.receive_json_from(timeout=2)) == {
            "type": "sweep_changed", "sweep_id": tpe.pk, "experiment_id": newer.pk, "change": "round"}  # fmt: skip

    async_to_sync(scenario)()


def _complete(run: Experiment) -> None:
    for n in range(1, run.total_rounds + 1):
        RoundMetric.record(run, metrics(n))
    Experiment.objects.filter(pk=run.pk).update(current_round=run.total_rounds, status="completed")
    search.reported(run)


async def _drain(ws) -> list[dict]:
    out = []
    while not await ws.receive_nothing(timeout=0.3):
        out.append(await ws.receive_json_from(timeout=1))
    return out
