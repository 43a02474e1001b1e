"""Two daphne processes behind one port (``python -m scripts.serve --processes 2``), a real Redis:
sockets of one experiment land on both processes, and each socket gets every live round once and
in order, whichever process holds it."""

from __future__ import annotations

import json
import sys
from contextlib import ExitStack

import psutil
import pytest

from orchestrator.experiments.models import Experiment
from orchestrator.live import events
from scripts import serve
from tests import live
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result
from tests.sockets.wsclient import experiment_socket

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _holders(server: live.Process, port: int) -> dict[int, int]:
    """daphne pid -> its established connections on ``port``."""
    out = {}
    for child in psutil.Process(server.proc.pid).children():
        conns = child.net_connections(kind="tcp")
        out[child.pid] = sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED and c.laddr.port == port)
    return out


@pytest.fixture
def two_processes(live_env, tmp_path):
    port = live.free_port()
    args = [sys.executable, "-m", "scripts.serve", "-b", "127.0.0.1", "-p", str(port), "--processes", "2"]
    server = live.Process("serve", args, live_env, tmp_path)
    try:
        live.wait_for(lambda: live._healthz_answers(port), 60, "scripts.serve")
        live.wait_for(lambda: len(_holders(server, port)) == 2, 60, "two daphne processes")
        yield server, port
    finally:
        server.stop()


def test_two_processes_serve_one_experiments_sockets_with_every_round_once(user, two_processes):
    server, port = two_processes
    experiment = new_experiment(owner=user, name="shared", spec=TINY_SPEC, visibility="public")
    Experiment.objects.filter(pk=experiment.pk).update(status="running")
    experiment.refresh_from_db()
    sockets = []
    with ExitStack() as stack:
        # New connections go to whichever process accepts first: open sockets until both hold some.
        while len(sockets) < 40 and sum(1 for n in _holders(server, port).values() if n) < 2:
            ws = stack.enter_context(
                experiment_socket(f"127.0.0.1:{port}", experiment.pk, token=experiment.share_token)
            )
            assert json.loads(ws.recv(timeout=10))["type"] == "status"  # subscribed: history read
            sockets.append(ws)
        holders = _holders(server, port)
        assert sum(1 for n in holders.values() if n) == 2, f"after {len(sockets)} sockets: {holders}"

        for r in range(1, 6):
            events.publish_round(experiment.pk, round_result(r))
        for ws in sockets:
            seen: list[int] = []
            while len(seen) < 5:
                message = json.loads(ws.recv(timeout=10))
                seen += [m["round"] for m in message.get("rounds") or [message] if m["type"] == "round"]
            assert seen == [1, 2, 3, 4, 5]


def test_serve_refuses_a_process_count_below_one():
    with pytest.raises(SystemExit):
        serve.main(["--processes", "0"])
