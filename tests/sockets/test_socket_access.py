"""Open sockets follow access changes (in-memory channel layer): every change that may take access
away makes the consumers of that experiment or user check again and close with 4403, after which
they forward nothing. Also: the workers socket shows an experiment only to those who may read it."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.urls import reverse

from accounts.models import Role
from orchestrator.experiments.models import Experiment, Visibility
from orchestrator.fleet.workers import Worker
from orchestrator.live import events
from orchestrator.sockets import consumers
from orchestrator.sockets.consumers import ExperimentConsumer, WorkersConsumer
from tests.accounts.world import PASSWORD, fast_password_hashing, make_world, metrics  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)
CLOSED = {"type": "websocket.close", "code": 4403}


@pytest.fixture
def world():
    w = make_world()
    Experiment.objects.filter(pk=w.experiment.pk).update(status="running")
    return w


async def _open(experiment, user=None, token: str = "") -> WebsocketCommunicator:
    """A connected experiment socket whose history and status have been read."""
    path = f"/ws/experiments/{experiment.pk}/" + (f"?token={token}" if token else "")
    ws = WebsocketCommunicator(ExperimentConsumer.as_asgi(), path)
    ws.scope["user"] = user or AnonymousUser()
    ws.scope["url_route"] = {"kwargs": {"experiment_id": experiment.pk}}
    assert (await ws.connect())[0]
    seen = []  # the history's rounds, then the status message that ends what a connect sends
    while not seen or seen[-1] != "status":
        out = await ws.receive_output(timeout=10)
        assert out["type"] == "websocket.send", (out, seen)
        seen.append(json.loads(out["text"])["type"])
    return ws


async def _round(experiment, r: int) -> None:
    await events.get_channel_layer().group_send(
        events.group_name(experiment.pk), events.round_event(experiment.pk, metrics(r))
    )


async def _assert_closed_then_silent(ws, experiment) -> None:
    assert await ws.receive_output(timeout=2) == CLOSED
    await _round(experiment, 99)
    assert await ws.receive_nothing(timeout=0.2)  # nothing forwarded after the close


async def _assert_not_closed(ws, seconds: float) -> None:
    """Nothing closes ``ws`` for ``seconds``; a message that was still on its way (a slow machine
    delivers the history late) is not a close."""
    while not await ws.receive_nothing(timeout=seconds):
        assert (await ws.receive_output())["type"] == "websocket.send"


async def _assert_still_streaming(ws, experiment, r: int = 50) -> None:
    await _round(experiment, r)
    assert (await ws.receive_json_from(timeout=2))["round"] == r


def test_it_closes_a_public_link_socket_when_the_link_is_revoked(world):
    async def scenario():
        ws = await _open(world.experiment, token=world.experiment.share_token)
        await _assert_still_streaming(ws, world.experiment)
        await sync_to_async(world.experiment.revoke_public_link)()
        await _assert_closed_then_silent(ws, world.experiment)

    async_to_sync(scenario)()


def test_it_closes_an_old_link_socket_when_the_link_is_replaced(world):
    async def scenario():
        ws = await _open(world.experiment, token=world.experiment.share_token)
        await sync_to_async(world.experiment.enable_public_link)()
        await _assert_closed_then_silent(ws, world.experiment)

    async_to_sync(scenario)()


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_it_closes_a_team_members_socket_when_they_are_removed(world, who):
    user = getattr(world, who)

    async def scenario():
        ws = await _open(world.experiment, user)
        membership = await sync_to_async(world.team.memberships.get)(user=user)
        await sync_to_async(membership.remove)()
        await _assert_closed_then_silent(ws, world.experiment)

    async_to_sync(scenario)()


def test_a_round_published_right_after_a_removal_does_not_reach_the_removed_member(world):
    """The experiment's own group gets the access event, in order with its rounds: the round right
    behind the removal cannot overtake the user group's event while that check reads the database."""

    async def scenario():
        ws = await _open(world.experiment, world.member)
        membership = await sync_to_async(world.team.memberships.get)(user=world.member)
        await sync_to_async(membership.remove)()
        await _round(world.experiment, 61)
        assert await ws.receive_output(timeout=2) == CLOSED  # not round 61 first
        assert await ws.receive_nothing(timeout=0.2)

    async_to_sync(scenario)()


def test_it_keeps_a_demoted_members_socket_open_because_viewers_still_read(world):
    async def scenario():
        ws = await _open(world.experiment, world.member)
        membership = await sync_to_async(world.team.memberships.get)(user=world.member)
        await sync_to_async(membership.set_role)(Role.VIEWER)
        await _assert_not_closed(ws, seconds=0.3)
        await _assert_still_streaming(ws, world.experiment)

    async_to_sync(scenario)()


def test_it_closes_team_sockets_when_the_sharing_page_makes_the_experiment_private(world):
    def make_private():
        client = Client()
        assert client.login(username=world.owner.username, password=PASSWORD)
        url = reverse("experiment_sharing", args=[world.experiment.pk])
        response = client.post(url, {"team": world.team.pk, "visibility": Visibility.PRIVATE})
        assert response.status_code == 302, response.content

    async def scenario():
        viewer = await _open(world.experiment, world.viewer)
        link = await _open(world.experiment, token=world.experiment.share_token)
        owner = await _open(world.experiment, world.owner)
        await sync_to_async(make_private)()
        assert await viewer.receive_output(timeout=2) == CLOSED
        assert await link.receive_output(timeout=2) == CLOSED
        await _assert_still_streaming(owner, world.experiment)  # the owner still reads it
        assert await viewer.receive_nothing(timeout=0.2) and await link.receive_nothing(timeout=0.2)

    async_to_sync(scenario)()


def test_it_closes_every_socket_of_a_deleted_experiment(world):
    async def scenario():
        owner = await _open(world.experiment, world.owner)
        link = await _open(world.experiment, token=world.experiment.share_token)
        await sync_to_async(world.experiment.delete)()
        assert await owner.receive_output(timeout=2) == CLOSED
        assert await link.receive_output(timeout=2) == CLOSED

    async_to_sync(scenario)()


def test_it_closes_the_sockets_of_a_deactivated_user(world):
    async def scenario():
        ws = await _open(world.experiment, world.member)
        world.member.is_active = False
        await sync_to_async(world.member.save)()
        await _assert_closed_then_silent(ws, world.experiment)

    async_to_sync(scenario)()


def test_it_rechecks_access_while_rounds_flow_even_without_an_access_event(world, monkeypatch):
    monkeypatch.setattr(consumers, "ACCESS_RECHECK_SECONDS", 0.0)

    async def scenario():
        ws = await _open(world.experiment, world.viewer)
        # A change behind the models' back publishes nothing; the periodic check still sees it.
        await sync_to_async(Experiment.objects.filter(pk=world.experiment.pk).update)(visibility=Visibility.PRIVATE)
        await _round(world.experiment, 60)
        await _assert_closed_then_silent(ws, world.experiment)

    async_to_sync(scenario)()


# -- the workers socket ------------------------------------------------------------------------------


async def _workers_socket(user) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(WorkersConsumer.as_asgi(), "/ws/workers/")
    ws.scope["user"] = user
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(timeout=2))["type"] == "queues"  # the queue table comes first
    return ws


def test_it_shows_a_workers_experiment_only_to_viewers_who_may_read_it(world):
    Experiment.objects.filter(pk=world.experiment.pk).update(visibility=Visibility.TEAM, share_token=None)
    Worker.objects.create(hostname="w1@box", queue="cpu", current_experiment=world.experiment)

    async def scenario():
        seen = {}
        for name in ("viewer", "other"):
            ws = await _workers_socket(getattr(world, name))
            snapshot = await ws.receive_json_from(timeout=2)
            worker = await sync_to_async(Worker.objects.get)(hostname="w1@box")
            await sync_to_async(events.publish_worker)(worker)  # a heartbeat, live
            live = await ws.receive_json_from(timeout=2)
            seen[name] = [
                (m["current_experiment_id"], m["current_experiment_name"], m["busy"]) for m in (snapshot, live)
            ]
            await ws.disconnect()
        assert seen["viewer"] == [(world.experiment.pk, world.experiment.name, True)] * 2
        assert seen["other"] == [(None, "", True)] * 2  # busy, but not with anything this user may read

    async_to_sync(scenario)()


def test_it_closes_the_workers_socket_of_a_deactivated_user(world):
    async def scenario():
        ws = await _workers_socket(world.other)
        world.other.is_active = False
        await sync_to_async(world.other.save)()
        assert await ws.receive_output(timeout=2) == CLOSED

    async_to_sync(scenario)()


def test_it_hides_a_workers_experiment_from_a_superuser_once_demoted(world):
    Experiment.objects.filter(pk=world.experiment.pk).update(visibility=Visibility.PRIVATE, share_token=None)
    Worker.objects.create(hostname="w1@box", queue="cpu", current_experiment=world.experiment)

    async def scenario():
        ws = await _workers_socket(world.superuser)
        assert (await ws.receive_json_from(timeout=2))["current_experiment_id"] == world.experiment.pk
        world.superuser.is_superuser = False
        await sync_to_async(world.superuser.save)()
        worker = await sync_to_async(Worker.objects.get)(hostname="w1@box")
        await sync_to_async(events.publish_worker)(worker)
        assert (await ws.receive_json_from(timeout=2))["current_experiment_id"] is None
        await ws.disconnect()

    async_to_sync(scenario)()
