"""Live events reach many sockets of one experiment through one subscription per process
(orchestrator.sockets.fanout, in-memory channel layer): rounds that come in a burst go out as one message,
each socket sees each round once and in order, and the public link's redaction is done once per
event, not once per socket."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.workers import Worker
from orchestrator.live import events
from orchestrator.sockets import consumers, fanout
from orchestrator.sockets.consumers import ExperimentConsumer
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def public_run(user):
    experiment = new_experiment(owner=user, name="public", spec=TINY_SPEC, visibility="public")
    Experiment.objects.filter(pk=experiment.pk).update(status="running", worker="gpu7@secret-box")
    Worker.objects.create(hostname="gpu7@secret-box", queue="cpu")
    experiment.refresh_from_db()
    return experiment


async def _viewer(experiment) -> WebsocketCommunicator:
    ws = WebsocketCommunicator(
        ExperimentConsumer.as_asgi(), f"/ws/experiments/{experiment.pk}/?token={experiment.share_token}"
    )
    ws.scope["user"] = AnonymousUser()
    ws.scope["url_route"] = {"kwargs": {"experiment_id": experiment.pk}}
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(timeout=2))["type"] == "status"  # no rounds yet: the status
    return ws


async def _messages(ws) -> list[dict]:
    out = []
    while not await ws.receive_nothing(timeout=fanout.COALESCE_SECONDS * 3):
        out.append(await ws.receive_json_from())
    return out


def _rounds_in(messages: list[dict]) -> list[int]:
    return [r["round"] for m in messages for r in (m["rounds"] if m["type"] == "rounds" else [m])]


def test_a_burst_of_rounds_reaches_every_socket_once_in_at_most_two_messages(public_run):
    async def scenario():
        viewers = [await _viewer(public_run) for _ in range(3)]
        layer, group = events.get_channel_layer(), events.group_name(public_run.pk)
        for r in (1, 2, 3, 4, 5):
            await layer.group_send(group, events.round_event(public_run.pk, round_result(r), published_at=1.0))
        await layer.group_send(group, events.round_event(public_run.pk, round_result(2)))  # a late duplicate
        for ws in viewers:
            messages = await _messages(ws)
            assert _rounds_in(messages) == [1, 2, 3, 4, 5], messages
            # The first may go out alone, at once; the rest came before the next message may go: together.
            assert len(messages) <= 2, [m["type"] for m in messages]
            assert messages[-1]["type"] == "rounds"
            await ws.disconnect()

    async_to_sync(scenario)()


def test_a_status_between_rounds_keeps_its_place(public_run):
    async def scenario():
        ws = await _viewer(public_run)
        layer, group = events.get_channel_layer(), events.group_name(public_run.pk)
        for r in (1, 2):
            await layer.group_send(group, events.round_event(public_run.pk, round_result(r)))
        await layer.group_send(group, {**events.status_event(public_run), "status": "paused", "current_round": 2})
        await layer.group_send(group, events.round_event(public_run.pk, round_result(3)))
        messages = await _messages(ws)
        kinds = [m["type"] for m in messages]
        assert "status" in kinds, kinds
        at = kinds.index("status")
        assert _rounds_in(messages[:at]) == [1, 2] and _rounds_in(messages[at + 1 :]) == [3], kinds
        await ws.disconnect()

    async_to_sync(scenario)()


def test_a_failed_channel_layer_read_loses_no_round_and_does_not_end_the_events(public_run, monkeypatch):
    # Redis fails a read twice (channels_redis then drops what it had buffered for the channel): the
    # rounds recorded meanwhile come from the database, and later events still arrive.
    monkeypatch.setattr(fanout, "READ_RETRY_SECONDS", 0.01)

    async def scenario():
        viewers = [await _viewer(public_run) for _ in range(2)]
        layer, group = events.get_channel_layer(), events.group_name(public_run.pk)
        real_receive, failures = layer.receive, []

        async def flaky_receive(channel):
            if len(failures) < 2:
                failures.append(channel)
                raise ConnectionError("Redis went away")
            return await real_receive(channel)

        for r in (1, 2):  # recorded, and their events lost with the failed reads
            await sync_to_async(_record)(public_run, r)
        monkeypatch.setattr(layer, "receive", flaky_receive)
        await layer.group_send(group, events.round_event(public_run.pk, round_result(1)))  # wakes the reader
        for ws in viewers:
            assert _rounds_in(await _messages(ws)) == [1, 2]
        assert len(failures) == 2
        await sync_to_async(_record)(public_run, 3)
        await layer.group_send(group, events.round_event(public_run.pk, round_result(3)))
        for ws in viewers:
            messages = await _messages(ws)
            assert _rounds_in(messages) == [3], messages
            await ws.disconnect()

    async_to_sync(scenario)()


def _record(experiment, r: int) -> None:
    RoundMetric.objects.create(experiment=experiment, **{**round_result(r), "worker": "gpu7@secret-box"})


def test_an_access_event_reads_the_database_once_per_link_not_per_socket(public_run, monkeypatch):
    reads: list[str] = []
    real = consumers.access.shares_with
    monkeypatch.setattr(consumers.access, "shares_with", lambda e, token: reads.append(token) or real(e, token))

    async def scenario():
        viewers = [await _viewer(public_run) for _ in range(4)]
        reads.clear()  # each socket's own check at connect
        layer, group = events.get_channel_layer(), events.group_name(public_run.pk)
        await layer.group_send(group, {"type": "access"})
        await layer.group_send(group, events.round_event(public_run.pk, round_result(1)))
        for ws in viewers:  # still allowed: the round follows
            assert _rounds_in(await _messages(ws)) == [1]
            await ws.disconnect()

    async_to_sync(scenario)()
    assert reads == [public_run.share_token]  # one read for the four sockets of one link


def test_the_public_link_gets_log_lines_redacted_once_per_event_not_per_socket(public_run, monkeypatch):
    reads: list[int] = []
    real = fanout.host_names
    monkeypatch.setattr(fanout, "host_names", lambda e: reads.append(e.pk) or real(e))

    async def scenario():
        viewers = [await _viewer(public_run) for _ in range(4)]
        entry = type("Entry", (), {"experiment_id": public_run.pk, "time": timezone.now(), "level": "info"})()
        entry.message = "round 3 ran on gpu7@secret-box"
        await events.get_channel_layer().group_send(events.group_name(public_run.pk), events.log_event(entry))
        for ws in viewers:
            assert [m["message"] for m in await _messages(ws)] == ["round 3 ran on a worker"]
            await ws.disconnect()

    async_to_sync(scenario)()
    assert reads == [public_run.pk]  # one database read for four sockets
