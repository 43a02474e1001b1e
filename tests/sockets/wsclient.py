"""A real WebSocket client (the ``websockets`` package) for the integration tests against daphne."""

from __future__ import annotations

import json
import time

from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

FORBIDDEN = 4403


def session_cookie(username: str, password: str) -> str:
    """A ``Cookie`` header of a signed-in session, valid in daphne (same database and SECRET_KEY)."""
    client = Client()
    assert client.login(username=username, password=password)
    return f"sessionid={client.cookies['sessionid'].value}"


def experiment_socket(server: str, experiment_id: int, cookie=None, after=None, token=None) -> ClientConnection:
    query = "&".join(f"{k}={v}" for k, v in (("after", after), ("token", token)) if v is not None)
    headers = {"Cookie": cookie} if cookie else {}
    return connect(
        f"ws://{server}/ws/experiments/{experiment_id}/" + (f"?{query}" if query else ""),
        origin=f"http://{server}",
        additional_headers=headers,
        open_timeout=10,
    )


def until_closed(ws: ClientConnection, deadline: float) -> tuple[list[dict], int | None]:
    """Messages received until the server closes the socket, and its close code (None: still open
    at ``deadline``, a ``time.monotonic()`` value)."""
    got = []
    while True:
        try:
            got.append(json.loads(ws.recv(timeout=max(deadline - time.monotonic(), 0.01))))
        except TimeoutError:
            return got, None
        except ConnectionClosed as closed:
            return got, closed.rcvd.code if closed.rcvd else None
