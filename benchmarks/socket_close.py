"""``python -m benchmarks socket_close``: how soon a WebSocket is closed after its access is revoked.

The delay the socket test used to assert on ("closed within 1 s"), measured here instead. A fresh local
FedWeb (``benchmarks.fleet.LocalFleet``, no workers) and a real daphne; a driver makes an experiment with
a public link, opens its live socket with the link's token, revokes the link and times until the socket
receives close 4403, ``REPEATS`` times (a new link each time). Not part of ``all`` (needs a Redis).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

from benchmarks.common import Options
from benchmarks.contenders import spread
from benchmarks.fleet import ROOT, LocalFleet, bench_user, start_driver
from benchmarks.recovery import SPEC

REPEATS = {"full": 10, "small": 3}
FORBIDDEN = 4403


def run(opts: Options) -> dict[str, Any]:
    from fedweb.localredis import free_port

    t0 = time.time()
    with LocalFleet(0) as fleet:
        port = free_port()
        args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fedweb.asgi:application"]
        daphne = subprocess.Popen(args, cwd=ROOT, env=fleet.env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        try:
            _wait_for_http(port)
            out = fleet.drive("benchmarks.socket_close", {"port": port, "repeats": REPEATS[opts.size]}, timeout=600)
        finally:
            os.killpg(daphne.pid, signal.SIGTERM)
            daphne.wait(30)
    s = spread(out["close_s"])
    return {
        "command": f"python -m benchmarks socket_close --size {opts.size}",
        "device": "daphne on this machine",
        "precision": None,
        "wall_seconds": time.time() - t0,
        "close_s": s,
        "anchor": "the access tests' old bound: closed within 1 s of the change",
        "anchor_ratio": None,
        "anchor_summary": f"public link revoked to close 4403: median {1000 * s['median']:.0f} ms "
        f"({1000 * s['min']:.0f}-{1000 * s['max']:.0f}) over {len(out['close_s'])} sockets",
    }


def _wait_for_http(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return
        except Exception as e:
            if getattr(e, "code", None) == 503:  # answering; only the workers are missing
                return
        time.sleep(0.2)
    raise TimeoutError(f"daphne did not answer on port {port} in {timeout:.0f} s")


def drive(payload: dict[str, Any]) -> dict[str, Any]:
    """In the fleet's environment: open a link's socket, revoke the link, time until close 4403."""
    start_driver(payload)
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from orchestrator.experiments.launch import create_experiment

    server = f"127.0.0.1:{payload['port']}"
    e = create_experiment(owner=bench_user("sockets"), name="sockets", spec=SPEC, start=False)
    delays = []
    for _ in range(payload["repeats"]):
        token = e.enable_public_link()
        url = f"ws://{server}/ws/experiments/{e.pk}/?token={token}"
        with connect(url, origin=f"http://{server}", open_timeout=30) as ws:
            ws.recv(timeout=30)  # the first message: the socket is subscribed
            revoked = time.perf_counter()
            e.revoke_public_link()
            try:
                while True:
                    ws.recv(timeout=60)
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd else None
            if code != FORBIDDEN:
                raise RuntimeError(f"the socket was closed with {code}, not {FORBIDDEN}")
            delays.append(time.perf_counter() - revoked)
    return {"close_s": delays}


if __name__ == "__main__":
    print(json.dumps(drive(json.load(sys.stdin))), flush=True)
