"""A real WebSocket client against a real daphne server while a real worker runs the rounds."""

import json

import pytest
from websockets.exceptions import ConnectionClosed

from orchestrator.experiments.models import Status
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.sockets.wsclient import experiment_socket as _socket
from tests.sockets.wsclient import session_cookie as _cookie

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _until_completed(ws, timeout=120) -> list[dict]:
    """Every message until the run's final status; a batch of rounds that arrived close together
    (``{"type": "rounds"}``, orchestrator.sockets.fanout) counts as its rounds, in order."""
    messages = []
    while True:
        message = json.loads(ws.recv(timeout=timeout))
        messages.extend(message["rounds"] if message["type"] == "rounds" else [message])
        if message["type"] == "status" and message["status"] in ("completed", "failed"):
            return messages


def _quiet(ws, seconds=1.5) -> bool:
    try:
        ws.recv(timeout=seconds)
    except TimeoutError:
        return True
    return False


def test_it_streams_rounds_live_and_resumes_after_k(user, workers, daphne):
    workers.start("w1")
    e = new_experiment(owner=user, name="live", spec={**TINY_SPEC, "rounds": 6})
    cookie = _cookie("alice", "alice-password")
    with _socket(daphne, e.pk, cookie) as ws:
        first = json.loads(ws.recv(timeout=10))
        assert first["type"] == "status" and first["status"] == "draft"
        e.start()
        messages = _until_completed(ws)
    rounds = [m for m in messages if m["type"] == "round"]
    assert [m["round"] for m in rounds] == [1, 2, 3, 4, 5, 6]  # one per round, in order
    assert set(rounds[0]["metrics"]) >= {"train_loss", "test_accuracy", "bytes_up", "rss_mb", "device"}
    assert messages[-1]["status"] == Status.COMPLETED and messages[-1]["current_round"] == 6
    assert all(m["type"] != "round" for m in messages[messages.index(rounds[-1]) + 1 :])
    assert any(m["type"] == "log" for m in messages)

    with _socket(daphne, e.pk, cookie, after=4) as ws:
        again = _until_completed(ws, timeout=10)
        assert [m["round"] for m in again if m["type"] == "round"] == [5, 6]
        assert again[-1]["status"] == "completed"
        assert _quiet(ws)  # nothing repeated afterwards


def test_it_refuses_other_users_and_anonymous_clients(user, other_user, daphne):
    e = new_experiment(owner=user, name="private", spec=TINY_SPEC)
    for cookie in (_cookie("bob", "bob-password"), None):
        with _socket(daphne, e.pk, cookie) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 4403
