"""The experiment consumer with the in-memory channel layer: history, dedupe, permissions."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser

from fedweb.asgi import application
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.live import events
from orchestrator.sockets.consumers import ExperimentConsumer
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result

pytestmark = pytest.mark.django_db(transaction=True)


def _metrics(r):
    return round_result(r, train_loss=1.0 / r)


def _communicator(experiment, user, after=None):
    path = f"/ws/experiments/{experiment.pk}/" + (f"?after={after}" if after is not None else "")
    communicator = WebsocketCommunicator(ExperimentConsumer.as_asgi(), path)
    communicator.scope["user"] = user
    communicator.scope["url_route"] = {"kwargs": {"experiment_id": experiment.pk}}
    return communicator


async def _drain(communicator):
    out = []
    while not await communicator.receive_nothing(timeout=0.2):
        out.append(await communicator.receive_json_from())
    return out


@pytest.fixture
def experiment(user):
    e = new_experiment(owner=user, name="e", spec=TINY_SPEC)
    for r in (1, 2, 3):
        RoundMetric.record(e, _metrics(r))
    Experiment.objects.filter(pk=e.pk).update(current_round=3, status="running")
    return e


def test_it_sends_history_after_n_then_status_then_only_new_rounds(experiment, user):
    async def scenario():
        ws = _communicator(experiment, user, after=1)
        connected, _ = await ws.connect()
        assert connected
        first = await _drain(ws)
        assert [(m["type"], m.get("round")) for m in first] == [("round", 2), ("round", 3), ("status", None)]
        assert first[0]["metrics"] == {**_metrics(2), "worker": ""}  # and where it ran
        # The newest round carries the server's leak verdict for the badge; older replayed ones don't.
        assert (first[0]["leak_warnings"], first[1]["leak_warnings"]) == (None, [])
        assert {"started", "finished", "worker", "waiting"} <= set(first[2])  # what the status line shows
        layer = events.get_channel_layer()
        group = events.group_name(experiment.pk)
        # a late duplicate of round 3 (published before the history was read) is dropped
        await layer.group_send(group, events.round_event(experiment.pk, _metrics(3)))
        await layer.group_send(group, events.round_event(experiment.pk, _metrics(4)))
        live = await _drain(ws)
        assert [m["round"] for m in live] == [4]
        await ws.disconnect()

    async_to_sync(scenario)()


@pytest.mark.parametrize("who", ["other", "anonymous"])
def test_it_closes_with_4403_for_users_who_cannot_view(experiment, other_user, who):
    user = other_user if who == "other" else AnonymousUser()

    async def scenario():
        ws = _communicator(experiment, user)
        await ws.connect()
        assert (await ws.receive_output(timeout=2)) == {"type": "websocket.close", "code": 4403}

    async_to_sync(scenario)()


def test_access_events_not_status_events_drive_the_permission_check(experiment, user, other_user):
    async def scenario():
        ws = _communicator(experiment, user)
        await ws.connect()
        await _drain(ws)
        from channels.db import database_sync_to_async

        # Ownership moves away behind the models' back: a status event alone queries nothing (200
        # viewers would each read the database per event) and is forwarded...
        await database_sync_to_async(Experiment.objects.filter(pk=experiment.pk).update)(owner=other_user)
        group = events.group_name(experiment.pk)
        await events.get_channel_layer().group_send(group, {**events.status_event(experiment), "status": "paused"})
        assert (await ws.receive_json_from(timeout=2))["status"] == "paused"
        # ...and the access event that every access change publishes closes the socket.
        await events.get_channel_layer().group_send(group, {"type": "access"})
        assert (await ws.receive_output(timeout=2)) == {"type": "websocket.close", "code": 4403}

    async_to_sync(scenario)()


def test_it_routes_experiment_sockets_through_auth_and_origin_checks(experiment):
    async def scenario():
        ws = WebsocketCommunicator(
            application, f"/ws/experiments/{experiment.pk}/", headers=[(b"origin", b"http://evil.example")]
        )
        connected, _ = await ws.connect()
        assert not connected  # AllowedHostsOriginValidator

    async_to_sync(scenario)()


def test_it_streams_workers_to_signed_in_users_only(user):
    from orchestrator.fleet.workers import Worker
    from orchestrator.sockets.consumers import WorkersConsumer
    from workers.heartbeat import beat

    Worker.objects.create(hostname="w1@box", queue="cpu")

    async def scenario():
        anonymous = WebsocketCommunicator(WorkersConsumer.as_asgi(), "/ws/workers/")
        anonymous.scope["user"] = AnonymousUser()
        await anonymous.connect()
        assert (await anonymous.receive_output(timeout=2)) == {"type": "websocket.close", "code": 4403}

        ws = WebsocketCommunicator(WorkersConsumer.as_asgi(), "/ws/workers/")
        ws.scope["user"] = user
        await ws.connect()
        queues = await ws.receive_json_from()
        assert queues["type"] == "queues" and "cpu" in [q["name"] for q in queues["queues"]]
        snapshot = await ws.receive_json_from()
        assert snapshot["type"] == "worker" and snapshot["hostname"] == "w1@box" and not snapshot["lost"]
        from channels.db import database_sync_to_async

        await database_sync_to_async(beat)("w0@box", "gpu")
        live = await ws.receive_json_from(timeout=2)
        assert live["hostname"] == "w0@box" and live["queue"] == "gpu"
        # The heartbeat of the fleet's first worker by name brings the queue table too: the
        # Workers page needs no polling.
        queues = await ws.receive_json_from(timeout=2)
        gpu = next(q for q in queues["queues"] if q["name"] == "gpu")
        assert queues["type"] == "queues" and gpu["live_workers"] == 1 and gpu["reason"] == ""
        await ws.disconnect()

    async_to_sync(scenario)()


def test_it_sends_recorded_rounds_before_a_terminal_status(experiment, user):
    async def scenario():
        ws = _communicator(experiment, user)
        await ws.connect()
        await _drain(ws)
        from channels.db import database_sync_to_async

        # Round 4 is recorded, but its event has not arrived when the web process announces the cancel.
        await database_sync_to_async(RoundMetric.record)(experiment, _metrics(4))
        cancelled = {**events.status_event(experiment), "status": "cancelled", "final": True}
        await events.get_channel_layer().group_send(events.group_name(experiment.pk), cancelled)
        got = await _drain(ws)
        assert [(m["type"], m.get("round")) for m in got] == [("round", 4), ("status", None)]
        await ws.disconnect()

    async_to_sync(scenario)()


def test_it_calls_a_status_final_only_when_no_live_worker_still_trains_a_round(experiment):
    from datetime import timedelta

    from django.utils import timezone

    def final(status: str, **fields) -> bool:
        Experiment.objects.filter(pk=experiment.pk).update(status=status, **fields)
        experiment.refresh_from_db()
        return events.status_event(experiment)["final"]

    in_flight = {"claimed_round": 1, "current_round": 0, "lease_expires": timezone.now() + timedelta(minutes=1)}
    assert not final("running", **in_flight)
    assert not final("cancelled")  # its last round is still training: that round's event comes later
    assert final("cancelled", lease_expires=timezone.now() - timedelta(seconds=1))  # its holder died
    assert final("cancelled", **{**in_flight, "current_round": 1})  # recorded: nothing more to come
    assert final("completed") and final("failed")
    assert not final("paused")


def test_it_keeps_redis_sockets_open_longer_than_the_channel_layers_blocking_read(settings):
    from channels_redis.core import RedisChannelLayer

    import fedweb.settings as configured  # the module, not the test's in-memory override
    from fedweb.env import channel_layers

    config = channel_layers("redis://127.0.0.1:6379/1", "p:")["default"]["CONFIG"]
    # Equal timeouts closed every idle socket after 5 s ("Timeout reading from ..." in daphne's log).
    assert config["hosts"][0]["socket_timeout"] > RedisChannelLayer.brpop_timeout
    assert config["prefix"] == "p:asgi"
    assert configured.CHANNEL_LAYERS == channel_layers(configured._CHANNELS_URL, configured.REDIS_PREFIX)
