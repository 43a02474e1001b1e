"""``python -m benchmarks ingest_live``: external runs logging over HTTP reach an open dashboard.

A real daphne and Redis channel layer on 127.0.0.1 (``viewers.LiveSite``), ``RUNS`` public external
runs, each with one WebSocket open on its dashboard socket as its page opens it, and one producer
thread per run that calls ``fedweb_client``'s ``run.log(round, 10 metrics)`` at ``RATE`` rounds/s,
as a training loop does. The client batches and POSTs to ``/api/external/runs/<id>/rounds/``; the
server stores each round and publishes it; the socket delivers it. Latency is end to end: arrival
at the socket minus the moment ``log`` was called. Per socket: every round exactly once, in order.

The run token's rate limit is raised for the site (``FEDWEB_EXTERNAL_RATE``): the client sends up
to 1/flush_interval requests per second per run, which is the load measured here, not the limit.
Bounded: ``RUNS`` sockets, ``ROUNDS`` rounds per run, 127.0.0.1 only. Needs ``$REDIS_URL``.

Besides latency, the row has the web process's CPU per report request and per round (daphne's
user + system time over the run, its main thread apart): on a shared machine the latency follows
the load average, the CPU a request costs much less so.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Options
from benchmarks.viewers import LiveSite, _ms

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "clients" / "python"))  # the client, as its users pip install it

RUNS = 5
RATE = 20.0  # rounds per second per run
METRICS = 10  # per round: 4 standard names, 6 custom
ROUNDS = {"small": 100, "full": 400}
FLUSH_INTERVAL = 0.05  # the client's batching period for this load (default 0.25 s)
GOAL_P99_MS = 250.0


def _metrics(n: int) -> dict[str, float]:
    standard = {"loss": 1.0 / n, "accuracy": n / (n + 1), "bytes_up": 4000 * n, "round_seconds": 0.05}
    return {**standard, **{f"custom/m{i}": i + 1.0 / n for i in range(METRICS - len(standard))}}


class Dashboard:
    """One open dashboard's socket: the rounds it receives, in order, and when."""

    def __init__(self) -> None:
        self.rounds: list[int] = []
        self.arrived: dict[int, float] = {}
        self.ready = asyncio.Event()

    async def watch(self, url: str, origin: str, last_round: int, timeout: float) -> None:
        from websockets.asyncio.client import connect

        async with connect(url, origin=origin, max_size=None, open_timeout=60) as ws:
            deadline = time.monotonic() + timeout
            while not self.rounds or self.rounds[-1] < last_round:
                raw = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
                now = time.time()
                event = json.loads(raw)
                if event["type"] == "status":
                    self.ready.set()
                for rnd in event.get("rounds") or ([event] if event["type"] == "round" else []):
                    self.rounds.append(rnd["round"])
                    self.arrived.setdefault(rnd["round"], now)


def produce(run, rounds: int, rate: float, start: threading.Event, logged: dict[int, float]) -> None:
    """A training loop at ``rate`` rounds/s that logs each round (pacing, not a wait on an outcome)."""
    start.wait()
    t0 = time.monotonic()
    for n in range(1, rounds + 1):
        delay = t0 + n / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        logged[n] = time.time()
        run.log(n, _metrics(n))


class ServerCpu:
    """CPU seconds the web processes spend from now on: in all, and in their main threads (the
    event loop: HTTP, sockets, channel layer; the rest is Django's request threads)."""

    def __init__(self, pids: list[int]) -> None:
        import psutil

        self.processes = [psutil.Process(pid) for pid in pids]
        self.start = self._now()

    def _now(self) -> tuple[float, float]:
        total = sum(p.cpu_times().user + p.cpu_times().system for p in self.processes)
        main = sum(t.user_time + t.system_time for p in self.processes for t in p.threads() if t.id == p.pid)
        return total, main

    def spent(self) -> tuple[float, float]:
        total, main = self._now()
        return total - self.start[0], main - self.start[1]


def _count_requests() -> list[int]:
    """The report requests the clients send from now on (one entry per POST of rounds)."""
    from fedweb_client import http

    sent: list[int] = []
    send = getattr(http.send_rounds, "__wrapped__", http.send_rounds)

    def counted(url, run_id, run_token, rounds, timeout):
        sent.append(len(rounds))
        return send(url, run_id, run_token, rounds, timeout)

    counted.__wrapped__ = send
    http.send_rounds = counted
    return sent


async def measure(site: LiveSite, runs: int, rounds: int, rate: float, journal_dir: Path) -> dict[str, Any]:
    import fedweb_client
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from orchestrator.experiments.models import Experiment

    def api_token() -> str:
        user = get_user_model().objects.get_or_create(username="bench-ingest")[0]
        return Token.objects.get_or_create(user=user)[0].key

    token = await sync_to_async(api_token)()
    url = f"http://127.0.0.1:{site.port}"
    clients = [
        fedweb_client.init(
            url=url,
            token=token,
            name=f"ingest-live-{i}",
            visibility="public",
            journal=journal_dir / f"{i}.jsonl",
            flush_interval=FLUSH_INTERVAL,
        )  # fmt: skip
        for i in range(runs)
    ]
    for c in clients:  # the run is created by the client's thread; wait for its id (bounded)
        deadline = time.monotonic() + 60
        while c.id is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert c.id is not None, f"the run was not created: {c.errors}"
    shares = await sync_to_async(
        lambda: dict(Experiment.objects.filter(pk__in=[c.id for c in clients]).values_list("pk", "share_token"))
    )()
    origin = f"http://127.0.0.1:{site.port}"
    boards = [Dashboard() for _ in clients]
    timeout = 120 + rounds / rate
    tasks = [
        asyncio.create_task(b.watch(f"ws://127.0.0.1:{site.port}/ws/experiments/{c.id}/?token={shares[c.id]}", origin, rounds, timeout))
        for b, c in zip(boards, clients, strict=True)
    ]  # fmt: skip
    await asyncio.wait_for(asyncio.gather(*(b.ready.wait() for b in boards)), 60)
    requests = _count_requests()
    cpu = ServerCpu(site.server_pids())
    start = threading.Event()
    logged = [{} for _ in clients]
    loop = asyncio.get_running_loop()
    producers = [
        loop.run_in_executor(None, produce, c, rounds, rate, start, lg) for c, lg in zip(clients, logged, strict=True)
    ]
    t0 = time.monotonic()
    start.set()
    await asyncio.gather(*producers)
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.monotonic() - t0
    server_cpu, main_cpu = cpu.spent()
    posts = len(requests)
    finished = [await loop.run_in_executor(None, c.finish, 60) for c in clients]
    errors = [repr(o) for o in outcomes if isinstance(o, BaseException)] + [e for c in clients for e in c.errors]
    latencies = sorted(b.arrived[n] - lg[n] for b, lg in zip(boards, logged, strict=True) for n in b.arrived if n in lg)
    expected = list(range(1, rounds + 1))
    return {
        "runs": runs,
        "rounds_per_run": rounds,
        "rate_rounds_per_s_per_run": rate,
        "metrics_per_round": METRICS,
        "client_flush_interval_s": FLUSH_INTERVAL,
        "deliveries": len(latencies),
        "p50_ms": _ms(latencies, 0.50),
        "p99_ms": _ms(latencies, 0.99),
        "max_ms": round(1000 * latencies[-1], 1) if latencies else None,
        "missed": sum(len(set(expected) - set(b.rounds)) for b in boards),
        "duplicated": sum(len(b.rounds) - len(set(b.rounds)) for b in boards),
        "out_of_order": sum(b.rounds != sorted(b.rounds) for b in boards),
        "finished": sum(finished),
        "errors": errors[:3],
        "wall_seconds": round(wall, 2),
        "report_requests": posts,
        "server_cpu_ms_per_request": round(1000 * server_cpu / posts, 2) if posts else None,
        "server_main_thread_cpu_ms_per_request": round(1000 * main_cpu / posts, 2) if posts else None,
        "server_cpu_ms_per_round": round(1000 * server_cpu / (runs * rounds), 2),
        "load_average_1min": round(os.getloadavg()[0], 1),  # the machine is shared: say how busy it was
        "cpus": os.cpu_count(),
    }


def run(opts: Options) -> dict[str, Any]:
    # FEDWEB_INGEST_ROUNDS=20: a quick run (the test of this benchmark).
    rounds = int(os.environ.get("FEDWEB_INGEST_ROUNDS") or ROUNDS[opts.size])
    os.environ["FEDWEB_EXTERNAL_RATE"] = "1000000"  # LiveSite passes the environment to daphne
    processes = int(os.environ.get("FEDWEB_WEB_PROCESSES") or 1)  # daphne processes (scripts.serve)
    t0 = time.monotonic()
    with LiveSite(processes) as site:
        row = asyncio.run(measure(site, RUNS, rounds, RATE, site.dir))
    return {
        "device": f"cpu (daphne, {processes} process{'es' if processes > 1 else ''}, {site.database_kind})",
        "web_processes": processes,
        "database": site.database_kind,
        "precision": opts.precision,
        "wall_seconds": round(time.monotonic() - t0, 1),
        "rounds_per_hour": None,
        "samples_per_s": None,
        "achieved_tflops": None,
        "peak_tflops": None,
        "peak_fraction": None,
        "peak_vram_mb": None,
        "peak_rss_mb": None,
        "anchor": f"goal: p99 < {GOAL_P99_MS:.0f} ms, {RUNS} external runs x {RATE:.0f} rounds/s x {METRICS} metrics (issue 20)",
        "anchor_ratio": round(row["p99_ms"] / GOAL_P99_MS, 3) if row["p99_ms"] is not None else None,
        "anchor_summary": f"p50 {row['p50_ms']} ms p99 {row['p99_ms']} ms, missed {row['missed']}, duplicated {row['duplicated']}, "
        f"server CPU {row['server_cpu_ms_per_request']} ms/request (load {row['load_average_1min']})",
        "rows": [row],
    }
