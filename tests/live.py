"""Real processes for integration tests: an embedded Redis, Celery workers and a daphne server.

No mocks: the processes are the ones `make run` starts, configured through the same environment
variables, sharing the test database (a file, or PostgreSQL) with the test process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

import pytest

from fedweb.localredis import answers as redis_answers
from fedweb.localredis import free_port, redis_server_binary

ROOT = Path(__file__).resolve().parent.parent
# The example plugin package (examples/fedweb-plugin-example), as tests load it with FEDWEB_PLUGINS.
EXAMPLE_DIR = ROOT / "examples" / "fedweb-plugin-example"
EXAMPLE_PLUGIN = "fedweb_plugin_example"
EXAMPLE_COMPONENTS = [
    ("model", "resnet_small"),
    ("dataset", "stripes"),
    ("strategy", "fedavg_clipped"),
    ("algorithm", "clipped_steps"),
]


class EmbeddedRedis:
    """A redis-server of the test's own (no persistence: a restart starts empty, as a redeployed one)."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.start()

    def start(self) -> None:
        """Start it on its port and wait until it answers."""
        self.proc = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_for(lambda: redis_answers(self.url), 15, "embedded Redis")

    def kill(self) -> None:
        """SIGKILL it: a crash, every message it held gone."""
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def wait_for(predicate, timeout: float, what: str, interval: float = 0.1, observe=None):
    """Poll ``predicate`` until it is truthy (its value is returned), at most ``timeout`` seconds.

    The bound is a safety net, not a measurement: on timeout the error names what was awaited and
    the state last observed (``observe()``, else the predicate's last value)."""
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    seen = observe() if observe is not None else value
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}; last observed: {seen!r}")


MISSING_SERVICE = "missing service"


def skip_for_missing_service(service: str, detail: str) -> NoReturn:
    """Skip with a reason the terminal summary collects (tests/conftest.py), so a green run names
    every test a missing broker, database or browser left out."""
    pytest.skip(f"{MISSING_SERVICE} {service}: {detail}")


def amqp_answers(url: str) -> bool:
    from kombu import Connection

    try:
        with Connection(url, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1)
        return True
    except Exception:
        return False


def delete_amqp_queues(url: str, queues: list[str]) -> None:
    """Remove a test's uniquely named RabbitMQ queues (RabbitMQ keeps durable queues forever)."""
    from kombu import Connection

    with Connection(url, connect_timeout=2) as conn:
        channel = conn.default_channel
        for queue in queues:
            channel.queue_delete(queue)


def database_url(settings_dict: dict) -> str:
    """The URL of the (test) database the test process is using, for the subprocesses."""
    if settings_dict["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{settings_dict['NAME']}"
    auth = settings_dict["USER"] + (f":{settings_dict['PASSWORD']}" if settings_dict["PASSWORD"] else "")
    port = f":{settings_dict['PORT']}" if settings_dict["PORT"] else ""
    return f"postgres://{auth}@{settings_dict['HOST'] or 'localhost'}{port}/{settings_dict['NAME']}"


class Process:
    """A subprocess in its own process group, with its output in a log file."""

    def __init__(self, name: str, args: list[str], env: dict, logdir: Path):
        self.name = name
        self.log_path = logdir / f"{name}.log"
        restarts = 1
        while self.log_path.exists():  # the same name started again: keep the earlier log
            restarts += 1
            self.log_path = logdir / f"{name}-{restarts}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._terminated = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL the whole group (Celery's main process and its pool child): a crashed machine."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self._log.close()

    def terminate(self) -> None:
        """Ask the whole group to shut down (SIGTERM) without waiting: ``stop`` then waits."""
        if self.alive() and not self._terminated:
            self._terminated = True
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        if self.alive():
            try:
                self.terminate()
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
            except ProcessLookupError:
                pass
        self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]


def kill_all(procs: list[Process]) -> None:
    """SIGKILL ``procs`` (a test's teardown, where how they shut down is not under test): a warm shutdown
    took 2-3 s a worker, and what it did (finish a round, hand its messages back) could only write to a
    database and broker prefix that no later test reads. The tests that stop a process warmly say so."""
    for proc in procs:
        proc.kill9()


def start_worker(env: dict, logdir: Path, name: str, queues: str = "cpu", concurrency: int = 1) -> Process:
    args = [sys.executable, "-m", "celery", "-A", "fedweb", "worker", "-Q", queues, "--concurrency", str(concurrency),
            "-n", f"{name}@%h", "--without-gossip", "--without-mingle", "-l", "info"]  # fmt: skip
    return Process(name, args, env, logdir)


def start_daphne(env: dict, logdir: Path, port: int, *, wait: bool = False) -> Process:
    """A daphne subprocess; with ``wait``, return once /healthz answers (200, or 503 while Redis is off)."""
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fedweb.asgi:application"]
    proc = Process("daphne", args, env, logdir)
    if wait:
        try:
            wait_for(lambda: _healthz_answers(port), 60, "daphne")
        except TimeoutError:
            proc.stop()
            raise AssertionError(f"daphne did not start:\n{proc.output()}") from None
    return proc


def _healthz_answers(port: int) -> bool:
    import urllib.request

    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).status in (200, 503)
    except Exception as e:
        return getattr(e, "code", None) == 503
