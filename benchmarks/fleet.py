"""A throwaway FedWeb on this machine for the benchmarks that need real workers (``scheduling --real``,
``shards``): a fresh data folder and SQLite database, N Celery worker processes (``--concurrency 1``,
one torch thread each, as a CPU worker is deployed), and a driver subprocess that submits through the
ORM and reads the figures back from the database.

Each benchmark configuration gets its own fleet, so no run sees another's rounds (``fair`` counts the
service recorded on its queue). The broker is the Redis at ``$REDIS_URL`` (required: the benchmark does
not start one; ``$CELERY_BROKER_URL`` overrides the broker as in FedWeb itself), under a key prefix unique
to the fleet, so it can share that Redis with other users.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0


def redis_url() -> str:
    url = os.environ.get("REDIS_URL", "")
    if not url:
        raise SystemExit("set REDIS_URL (e.g. redis://127.0.0.1:6379/0): the benchmark's workers use it as broker")
    return url


class LocalFleet:
    """``with LocalFleet(2, {"FEDWEB_POLICY": "cpu=srtf"}) as fleet: fleet.drive("benchmarks.x", payload)``."""

    def __init__(self, workers: int, env: dict[str, str] | None = None, concurrency: int = 1) -> None:
        self.workers = workers
        self.concurrency = concurrency  # worker processes per worker (pack runs 2 rounds at once on one)
        self.redis_url = redis_url()  # before anything is made: no broker, no fleet
        self.extra = env or {}
        self.procs: list[tuple[subprocess.Popen, Any]] = []

    def __enter__(self) -> LocalFleet:
        self.dir = Path(tempfile.mkdtemp(prefix="fedweb-bench-"))
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "FEDWEB_POLICY")},
            "DJANGO_SETTINGS_MODULE": "fedweb.settings",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "REDIS_URL": self.redis_url,
            "FEDWEB_REDIS_PREFIX": f"fedweb-bench-{uuid.uuid4().hex[:8]}:",
            "FEDWEB_DATA_DIR": str(self.dir / "data"),
            "DATABASE_URL": f"sqlite:///{self.dir / 'db.sqlite3'}",
            "FEDWEB_QUEUES": "cpu,gpu",  # the workers serve "cpu", where CPU experiments go
            "HEARTBEAT_INTERVAL": "1",
            "WORKER_LOST_AFTER": "30",
            **self.extra,
        }
        try:
            subprocess.run(
                [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=self.env, check=True
            )
            self.grow(self.workers)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def grow(self, workers: int) -> None:
        """Start workers until the fleet has ``workers`` (the ones it has keep running)."""
        for i in range(len(self.procs), workers):
            log = open(self.dir / f"worker-{i}.log", "wb")  # noqa: SIM115 - closed in __exit__
            args = [sys.executable, "-m", "celery", "-A", "fedweb", "worker", "-Q", "cpu", "--concurrency", str(self.concurrency),
                    "-n", f"bench{i}@%h", "--without-gossip", "--without-mingle", "-l", "warning"]  # fmt: skip
            proc = subprocess.Popen(
                args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
            self.procs.append((proc, log))
        self.workers = max(self.workers, workers)

    def drive(self, module: str, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Run ``python -m module`` against this fleet with ``payload`` as JSON on stdin; returns its
        last stdout line as JSON. The driver waits for the workers itself (``wait_for_workers``)."""
        payload = {**payload, "workers": self.workers, "worker_pids": [proc.pid for proc, _ in self.procs]}
        proc = subprocess.run(
            [sys.executable, "-m", module], cwd=ROOT, env=self.env, input=json.dumps(payload),
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        sys.stderr.write(proc.stderr[-3000:])
        if proc.returncode != 0:
            logs = "\n".join(p.read_text(errors="replace")[-1500:] for p in sorted(self.dir.glob("worker-*.log")))
            raise RuntimeError(f"{module} failed ({proc.returncode}); worker logs:\n{logs}")
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def __exit__(self, *exc: object) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc, log in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for_workers(n: int) -> None:
    """In a driver (Django set up): return once ``n`` workers beat, so the scheduler counts their slots."""
    from orchestrator.fleet.workers import Worker

    deadline = time.monotonic() + START_TIMEOUT_S
    while Worker.live().count() < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {n} workers came alive in {START_TIMEOUT_S:.0f} s")
        time.sleep(0.2)


def setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedweb.settings")
    import django

    django.setup()


def start_driver(payload: dict[str, Any]) -> None:
    """The first thing a driver does: Django set up, and every worker of the fleet beating."""
    setup_django()
    wait_for_workers(payload["workers"])


def bench_user(name: str):
    """The owner of a driver's experiments (``bench-<name>``), made on first use."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get_or_create(username="bench-" + name)[0]


def wait_until_finished(ids: list[int], t0: float, deadline_s: float, poll_s: float, each_poll=None) -> None:
    """In a driver: return once every experiment in ``ids`` has finished (completed, failed or
    cancelled); TimeoutError once ``deadline_s`` has passed since ``t0`` (a ``time.time()``).
    ``each_poll`` is called on every look, before the sleep."""
    from orchestrator.experiments.models import FINISHED, Experiment

    while Experiment.objects.filter(pk__in=ids).exclude(status__in=FINISHED).exists():
        if time.time() - t0 > deadline_s:
            raise TimeoutError(f"experiments still unfinished after {deadline_s:.0f} s")
        if each_poll is not None:
            each_poll()
        time.sleep(poll_s)


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by these worker processes and their pool children: what
    the work cost, whatever else shares the machine's cores (wall time does not say that on a busy host)."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            main = psutil.Process(pid)
            for proc in [main, *main.children(recursive=True)]:
                t = proc.cpu_times()
                total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total
