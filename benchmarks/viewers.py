"""``python -m benchmarks viewers``: live-page latency with many viewers of one public run.

A real daphne (``fedweb.asgi``; ``$FEDWEB_WEB_PROCESSES`` of them behind one port, ``scripts.serve``)
and the real Redis channel layer on 127.0.0.1, a fresh SQLite database, one public experiment (its
share link), and N plain asyncio WebSocket clients on its public socket, as a browser's page opens
it. The clients run in a process of their own pinned to one core (``client_core``), so the load
client takes at most that core from the server; its CPU and daphne's are recorded. This process
then records rounds at ``RATE`` rounds/s as a worker does (the metrics row, the run's
``current_round``, then ``events.publish_round``); each round event carries ``published_at``, the
time just after the database writes, and each client notes when the round arrives. Reported per viewer count: p50,
p99 and max of arrival - published_at over every (client, round), and rounds missed or duplicated
(a client must see each round exactly once, whether it comes alone or coalesced with others).

The load is bounded (at most ``max(VIEWERS)`` sockets, ``ROUNDS`` rounds per count) and stays on
127.0.0.1. Needs ``$REDIS_URL``; keys go under a prefix unique to the run.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import Options
from benchmarks.fleet import redis_url

ROOT = Path(__file__).resolve().parents[1]
VIEWERS = {"small": (50, 200), "full": (50, 200, 500)}
RATE = 20.0  # rounds per second: GPU rounds of a small model come this fast
ROUNDS = {"small": 60, "full": 100}
CONNECT_AT_ONCE = 25  # sockets opened concurrently while the viewers arrive
GOAL_P99_MS = 250.0


class LiveSite:
    """A throwaway FedWeb web server: temp data folder and SQLite, migrated, ``processes`` daphne
    processes behind a free port (``scripts.serve``).

    ``$FEDWEB_BENCH_DATABASE_URL`` (a PostgreSQL server's URL, e.g. ``postgres://postgres@127.0.0.1:5432/postgres``):
    a fresh database made on that server for the run and dropped after, as docker-compose deploys
    (PostgreSQL and several web processes; SQLite locks the whole file on every write)."""

    def __init__(self, processes: int = 1) -> None:
        self.processes = processes
        self.server_url = os.environ.get("FEDWEB_BENCH_DATABASE_URL", "")
        self.database = f"fedweb_bench_{uuid.uuid4().hex[:8]}" if self.server_url else ""

    @property
    def database_kind(self) -> str:
        return "postgresql" if self.server_url else "sqlite"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(sql)

    def _database_url(self) -> str:
        if not self.server_url:
            return f"sqlite:///{self.dir / 'db.sqlite3'}"
        self._admin(f'CREATE DATABASE "{self.database}"')
        return self.server_url.rsplit("/", 1)[0] + "/" + self.database

    def server_pids(self) -> list[int]:
        """The daphne processes serving the port."""
        import psutil

        return [c.pid for c in psutil.Process(self.daphne.pid).children() if "daphne" in " ".join(c.cmdline())]

    def __enter__(self) -> LiveSite:
        from fedweb.localredis import free_port

        self.dir = Path(tempfile.mkdtemp(prefix="fedweb-viewers-"))
        self.port = free_port()
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            "DJANGO_SETTINGS_MODULE": "fedweb.settings",
            "PYTHONPATH": str(ROOT),
            "REDIS_URL": redis_url(),
            "FEDWEB_REDIS_PREFIX": f"fedweb-viewers-{uuid.uuid4().hex[:8]}:",
            "FEDWEB_DATA_DIR": str(self.dir / "data"),
            "DATABASE_URL": self._database_url(),
            "DEBUG": "0",
            "LOG_LEVEL": "WARNING",
        }
        os.environ.update(
            {k: self.env[k] for k in ("REDIS_URL", "FEDWEB_REDIS_PREFIX", "FEDWEB_DATA_DIR", "DATABASE_URL")}
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=self.env, check=True
        )
        # scripts.serve: PROCESSES daphne processes on one listening socket, as `make run` starts them.
        args = [sys.executable, "-m", "scripts.serve", "-b", "127.0.0.1", "-p", str(self.port)]
        args += ["--processes", str(self.processes)]
        self.daphne = subprocess.Popen(
            args, cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )  # no access log lines on the benchmark's output
        _wait_listening(self.port, self.daphne)
        deadline = time.monotonic() + 60
        while len(self.server_pids()) < self.processes:  # each answers /healthz only once it runs
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.processes} daphne processes did not start within 60 s")
            time.sleep(0.2)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedweb.settings")
        import django

        django.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.daphne.terminate()
        try:
            self.daphne.wait(15)
        except subprocess.TimeoutExpired:
            self.daphne.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.database:
            from django.db import connections

            connections.close_all()  # this process's own connection to it, from django.setup()
            self._admin(f'DROP DATABASE IF EXISTS "{self.database}" WITH (FORCE)')


def _wait_listening(port: int, proc: subprocess.Popen) -> None:
    import urllib.request

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("daphne exited")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
            return
        except Exception as e:
            if getattr(e, "code", None):  # an HTTP answer (503: no worker here) means it listens
                return
        time.sleep(0.2)
    raise TimeoutError("daphne did not answer within 60 s")


def public_run(name: str):
    """A running public experiment (its share link) with a round budget no benchmark reaches."""
    from django.contrib.auth import get_user_model

    from orchestrator.models import Experiment

    owner = get_user_model().objects.get_or_create(username="bench-viewers")[0]
    experiment = Experiment.objects.create(owner=owner, name=name, spec={"rounds": 100_000}, visibility="public")
    Experiment.objects.filter(pk=experiment.pk).update(status="running", queue="cpu", total_rounds=100_000)
    experiment.refresh_from_db()
    assert experiment.share_token, "a public experiment gets its link when saved"
    return experiment


def _metrics(n: int) -> dict[str, Any]:
    from fedweb_engine.results.round_result import RoundResult

    values = {
        "round": n, "participants": 10, "completed": 10, "stragglers": 0, "dropped": 0,
        "train_loss": 1.0 / n, "test_loss": 1.1 / n, "test_accuracy": 0.5, "bytes_down": 4000,
        "bytes_up": 4000, "bytes_formula": 8000, "round_seconds": 0.05, "train_seconds": 0.04,
        "samples": 200, "rss_mb": 500.0, "threads": 4, "vram_allocated_mb": None, "vram_reserved_mb": None,
        "vram_peak_mb": None, "device": "cpu",
    }  # fmt: skip
    return RoundResult(**values).to_dict()


def record_rounds(experiment_id: int, rounds: int, rate: float, start: threading.Event) -> None:
    """What a worker does per round, at ``rate`` rounds/s: the row, current_round, the event."""
    from django.db import close_old_connections

    from orchestrator.live import events
    from orchestrator.models import Experiment, RoundMetric

    experiment = Experiment.objects.get(pk=experiment_id)
    start.wait()
    t0 = time.monotonic()
    try:
        for n in range(1, rounds + 1):
            delay = t0 + n / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the producer, not standing for an outcome
            metrics = _metrics(n)
            RoundMetric.record(experiment, metrics)
            Experiment.objects.filter(pk=experiment_id).update(current_round=n)
            events.publish_round(experiment_id, metrics)
    finally:
        close_old_connections()


class Viewer:
    """One browser tab's socket: every round it receives, with the latency of each."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.rounds: list[int] = []
        self.ready = asyncio.Event()

    async def watch(self, url: str, origin: str, last_round: int, timeout: float) -> None:
        from websockets.asyncio.client import connect

        async with connect(url, origin=origin, max_size=None, open_timeout=60) as ws:
            deadline = time.monotonic() + timeout
            while not self.rounds or self.rounds[-1] < last_round:
                raw = await asyncio.wait_for(ws.recv(), max(0.1, deadline - time.monotonic()))
                arrived = time.time()
                event = json.loads(raw)
                if event["type"] == "status":
                    self.ready.set()
                for rnd in event.get("rounds") or ([event] if event["type"] == "round" else []):
                    self.rounds.append(rnd["round"])
                    if rnd.get("published_at") is not None:
                        self.latencies.append(arrived - rnd["published_at"])


def client_core() -> int | None:
    """The core the viewers' process is pinned to (the last one this process may use), so the load
    client takes at most one core from daphne; None with a single core."""
    cores = sorted(os.sched_getaffinity(0))
    return cores[-1] if len(cores) > 1 else None


def _clients(conn, url: str, origin: str, viewers: int, rounds: int, timeout: float, core: int | None) -> None:
    """The viewers' process: open ``viewers`` sockets, say so, then collect every round."""
    if core is not None:
        os.sched_setaffinity(0, {core})

    lags: list[float] = []

    async def ticker() -> None:
        """How late this process's loop wakes for a 10 ms sleep: latency that is the client's own
        (its core is busy elsewhere), not the server's."""
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(0.01)
            lags.append(loop.time() - t - 0.01)

    async def main() -> dict[str, Any]:
        clients = [Viewer() for _ in range(viewers)]
        tasks = []
        for i in range(0, viewers, CONNECT_AT_ONCE):
            batch = clients[i : i + CONNECT_AT_ONCE]
            tasks += [asyncio.create_task(c.watch(url, origin, rounds, timeout)) for c in batch]
            await asyncio.wait_for(asyncio.gather(*(c.ready.wait() for c in batch)), 60)
        conn.send("ready")
        tick = asyncio.create_task(ticker())
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        tick.cancel()
        expected = set(range(1, rounds + 1))
        return {
            "latencies": [x for c in clients for x in c.latencies],
            "missed": sum(len(expected - set(c.rounds)) for c in clients),
            "duplicated": sum(len(c.rounds) - len(set(c.rounds)) for c in clients),
            "errors": [repr(o) for o in outcomes if isinstance(o, BaseException)][:3],
            "client_loop_lag_p99_ms": _ms(sorted(lags), 0.99),
        }

    try:
        conn.send(asyncio.run(main()))
    except BaseException as e:  # the parent reports it instead of waiting for a result that never comes
        conn.send({"failed": repr(e)})
        raise


def measure(site: LiveSite, viewers: int, rounds: int, rate: float) -> dict[str, Any]:
    import multiprocessing

    import psutil

    experiment = public_run(f"viewers-{viewers}")
    url = f"ws://127.0.0.1:{site.port}/ws/experiments/{experiment.pk}/?token={experiment.share_token}"
    origin = f"http://127.0.0.1:{site.port}"
    core = client_core()
    ours, theirs = multiprocessing.Pipe()
    args = (theirs, url, origin, viewers, rounds, 120 + rounds / rate, core)
    client = multiprocessing.get_context("spawn").Process(target=_clients, args=args, daemon=True)
    client.start()
    try:
        if not ours.poll(180):
            raise TimeoutError(f"{viewers} viewers did not all connect within 180 s")
        ready = ours.recv()
        if ready != "ready":
            raise RuntimeError(f"the viewers' process failed: {ready}")
        servers = [psutil.Process(pid) for pid in site.server_pids()]
        client_proc = psutil.Process(client.pid)

        def cpu_now() -> tuple[float, float]:
            return sum(sum(p.cpu_times()[:2]) for p in servers), sum(client_proc.cpu_times()[:2])

        cpu0, t0 = cpu_now(), time.monotonic()
        start = threading.Event()
        start.set()
        record_rounds(experiment.pk, rounds, rate, start)
        if not ours.poll(180):
            raise TimeoutError("the viewers did not receive every round within 180 s")
        cpu1 = cpu_now()  # the client has its result: it has seen the last round
        result = ours.recv()
        wall = time.monotonic() - t0
    finally:
        client.join(30)
        if client.is_alive():
            client.kill()
    if "failed" in result:
        raise RuntimeError(f"the viewers' process failed: {result['failed']}")
    latencies = sorted(result["latencies"])
    return {
        "viewers": viewers,
        "rounds": rounds,
        "rate_rounds_per_s": rate,
        "deliveries": len(latencies),
        "p50_ms": _ms(latencies, 0.50),
        "p99_ms": _ms(latencies, 0.99),
        "max_ms": round(1000 * latencies[-1], 1) if latencies else None,
        "mean_ms": round(1000 * statistics.fmean(latencies), 1) if latencies else None,
        "missed": result["missed"],
        "duplicated": result["duplicated"],
        "errors": result["errors"],
        "wall_seconds": round(wall, 2),
        # Where the time goes: CPU seconds of the daphne processes and of the viewers' process
        # (pinned to ``client_core``, so it takes at most that one core from the server).
        "daphne_cpu_seconds": round(cpu1[0] - cpu0[0], 2),
        "client_cpu_seconds": round(cpu1[1] - cpu0[1], 2),
        "daphne_cpu_us_per_delivery": round(1e6 * (cpu1[0] - cpu0[0]) / len(latencies), 1) if latencies else None,
        "client_core": core,
        "client_loop_lag_p99_ms": result["client_loop_lag_p99_ms"],
        "load_average_1min": round(os.getloadavg()[0], 1),  # the machine is shared: say how busy it was
        "cpus": os.cpu_count(),
    }


def _ms(sorted_values: list[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return round(1000 * sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))], 1)


def run(opts: Options) -> dict[str, Any]:
    # FEDWEB_VIEWERS=3,5 and FEDWEB_VIEWER_ROUNDS=10: a quick run (the test of this benchmark).
    counts = tuple(int(n) for n in os.environ.get("FEDWEB_VIEWERS", "").split(",") if n) or VIEWERS[opts.size]
    rounds = int(os.environ.get("FEDWEB_VIEWER_ROUNDS") or ROUNDS[opts.size])
    processes = int(os.environ.get("FEDWEB_WEB_PROCESSES") or 1)  # daphne processes (scripts.serve)
    t0 = time.monotonic()
    with LiveSite(processes) as site:
        rows = [measure(site, n, rounds, RATE) for n in counts]
    at_200 = next((r for r in rows if r["viewers"] == 200), rows[-1])
    return {
        "device": f"cpu (daphne, {processes} process{'es' if processes > 1 else ''})",
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
        "anchor": f"goal: p99 < {GOAL_P99_MS:.0f} ms at 200 viewers and {RATE:.0f} rounds/s (issue 21)",
        "anchor_ratio": round(at_200["p99_ms"] / GOAL_P99_MS, 3) if at_200["p99_ms"] is not None else None,
        "anchor_summary": " ".join(f"{r['viewers']}v p99 {r['p99_ms']} ms" for r in rows),
        "rows": rows,
    }
