"""Shared fixtures. Unit tests get an in-memory channel layer and a recorder instead of the
broker; tests marked ``integration`` get a real Redis, real workers and a real daphne server."""

from __future__ import annotations

import os
import uuid

import pytest

from tests import live

TINY_SPEC = {
    "seed": 3,
    "rounds": 5,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8},
    "model": {"name": "mlp", "hidden": 32},
    "participation": {"clients_per_round": 4},
    "compute": {"device": "cpu"},
}


def pytest_terminal_summary(terminalreporter) -> None:
    """Name every test skipped for a missing service (RabbitMQ, PostgreSQL, Chromium), by service,
    and say which database the postgres-marked tests used: a green run cannot hide them."""
    from django.conf import settings

    missing: dict[str, list[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if live.MISSING_SERVICE in reason:
            service = reason.split(live.MISSING_SERVICE, 1)[1].split(":", 1)[0].strip()
            missing.setdefault(service, []).append(report.nodeid)
    for service, ids in missing.items():
        terminalreporter.write_line(f"skipped for a missing service: {service} ({len(ids)}): {', '.join(ids)}")
    ran = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, []) if r.when == "call"]
    if postgres := [r for r in ran if "postgres" in r.keywords]:
        engine = settings.DATABASES["default"]["ENGINE"].rsplit(".", 1)[-1]
        terminalreporter.write_line(f"postgres-marked tests ran on {engine}: {len(postgres)}")
    if amqp := [r.nodeid for r in ran if "[amqp" in r.nodeid or "real_rabbitmq" in r.nodeid]:
        terminalreporter.write_line(f"RabbitMQ variants ran ({len(amqp)}): {', '.join(amqp)}")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(tmp_path_factory):
    """A file-based SQLite test database (workers in other processes must open it too), or a
    uniquely named PostgreSQL one so that runs sharing a server don't drop each other's."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    db.setdefault("TEST", {})
    if db["ENGINE"].endswith("sqlite3"):
        db["TEST"]["NAME"] = str(tmp_path_factory.mktemp("db") / "test.sqlite3")
    else:
        db["TEST"]["NAME"] = f"test_fedweb_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session", autouse=True)
def _own_compile_cache(tmp_path_factory):
    """The suite's compiled steps in a folder of its own: what this machine built before (packages
    that would make compute.compile auto compile) never changes what a test sees."""
    from fedweb_engine.training import compiled

    before = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("compile-cache"))
    compiled._configured = None
    yield
    if before is None:
        os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
    else:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = before
    compiled._configured = None


@pytest.fixture(autouse=True)
def _isolated(request, settings, tmp_path, monkeypatch):
    settings.FEDWEB_DATA_DIR = tmp_path / "data"
    if request.node.get_closest_marker("integration"):
        return
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Unit tests call schedule() as the pass that follows a recorded round; the affinity grace that
    # keeps such a round for its holder's own pass has its own tests (tests/fleet/test_affinity.py).
    settings.FEDWEB_AFFINITY_GRACE = 0
    # Unit tests never reach a broker: sent rounds are recorded for the test to inspect.
    from fedweb.celery import app

    sent: list[tuple] = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **kw: sent.append((tuple(args), kw)))
    request.node.enqueued = sent


@pytest.fixture
def example_plugin(monkeypatch):
    """The example plugin loaded into this process as ``FEDWEB_PLUGINS`` loads it (yields its name),
    then forgotten again."""
    import sys

    from fedweb_engine.components import registry
    from fedweb_engine.components.plugins import load_plugins

    monkeypatch.syspath_prepend(str(live.EXAMPLE_DIR))
    load_plugins({"FEDWEB_PLUGINS": live.EXAMPLE_PLUGIN})
    yield live.EXAMPLE_PLUGIN
    for kind, name in live.EXAMPLE_COMPONENTS:
        registry.unregister(kind, name)
    for module in [m for m in sys.modules if m == live.EXAMPLE_PLUGIN or m.startswith(live.EXAMPLE_PLUGIN + ".")]:
        del sys.modules[module]


@pytest.fixture
def enqueued(request):
    return request.node.enqueued


@pytest.fixture
def empty_round_cache():
    """No model built in-process by an earlier test: each round task rebuilds (or restores) its own."""
    from workers import runtime

    runtime._cache.clear()
    yield
    runtime._cache.clear()


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("bob", password="bob-password")


# -- integration ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """REDIS_URL when it answers, else an embedded redis-server on a free port."""
    url = os.environ.get("REDIS_URL")
    if url and live.redis_answers(url):
        yield url
        return
    server = live.EmbeddedRedis(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


RABBITMQ_URL = os.environ.get("RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


@pytest.fixture
def broker(request) -> str:
    """``redis`` (the default) or ``amqp``: parametrize a test indirectly to run it on RabbitMQ."""
    kind = getattr(request, "param", "redis")
    if kind == "amqp" and not live.amqp_answers(RABBITMQ_URL):
        live.skip_for_missing_service(
            "RabbitMQ", f"nothing answers at {RABBITMQ_URL} (set RABBITMQ_URL to run this on it)"
        )
    return kind


@pytest.fixture
def live_env(redis_url, broker, transactional_db, settings, tmp_path):
    """Environment for worker/daphne subprocesses, and this process pointed at the same broker.

    A unique key prefix (Redis) or unique queue names (RabbitMQ) keep this run's queues and
    groups apart from anyone sharing those servers.
    """
    from django.db import connection

    from fedweb.celery import app
    from fedweb.env import channel_layers, redis_urls

    suffix = uuid.uuid4().hex[:8]
    prefix = f"fedweb-test-{suffix}:"
    broker_url, channels = redis_urls(redis_url)
    settings.CHANNEL_LAYERS = channel_layers(channels, prefix)  # what daphne builds from the env below
    saved = app.conf.broker_url, app.conf.broker_transport_options
    if broker == "amqp":
        broker_url, options = RABBITMQ_URL, {}
        settings.FEDWEB_QUEUES = [f"cpu-{suffix}", f"gpu-{suffix}"]
    else:
        options = {**saved[1], "global_keyprefix": prefix}
    app.conf.broker_url, app.conf.broker_transport_options = broker_url, options
    _reset_celery_connections(app)
    env = {
        **{k: v for k, v in os.environ.items() if k != "SECRET_KEY_FILE"},
        "DJANGO_SETTINGS_MODULE": "fedweb.settings",
        "DATABASE_URL": live.database_url(connection.settings_dict),
        "REDIS_URL": redis_url,
        "SECRET_KEY": settings.SECRET_KEY,  # sessions made here must be valid in daphne
        "FEDWEB_REDIS_PREFIX": prefix,
        "FEDWEB_DATA_DIR": str(settings.FEDWEB_DATA_DIR),
        "CHECKPOINT_EVERY": "2",
        "CHECKPOINT_KEEP": "2",
        # A dead worker's round comes back after WORKER_LOST_AFTER (the lease), not the broker's
        # visibility timeout, which stays at its default of an hour here.
        "HEARTBEAT_INTERVAL": "1",
        "WORKER_LOST_AFTER": "5",
        "FEDWEB_QUEUES": ",".join(settings.FEDWEB_QUEUES),
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
    }
    if broker == "amqp":
        env["CELERY_BROKER_URL"] = RABBITMQ_URL
    settings.CHECKPOINT_EVERY, settings.CHECKPOINT_KEEP = 2, 2
    settings.HEARTBEAT_INTERVAL, settings.WORKER_LOST_AFTER = 1, 5
    yield env
    if broker == "amqp":
        live.delete_amqp_queues(RABBITMQ_URL, settings.FEDWEB_QUEUES)
    app.conf.broker_url, app.conf.broker_transport_options = saved
    _reset_celery_connections(app)


def _reset_celery_connections(app):
    # Celery caches its connection and producer pools; drop them so the new broker URL is used.
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def workers(live_env, tmp_path):
    """Start Celery workers: ``workers.start("w1")``; all are stopped at the end of the test."""
    from django.utils import timezone

    from orchestrator.fleet.workers import Worker

    started: list[live.Process] = []

    class Workers:
        def start(
            self, name: str = "w1", queues: str | None = None, env: dict | None = None, concurrency: int = 1
        ) -> live.Process:
            """Start worker ``name``; ``env`` adds variables to its environment (e.g. FEDWEB_PLUGINS)."""
            return self.start_all(name, queues=queues, env=env, concurrency=concurrency)[name]

        def start_all(
            self,
            *names: str,
            queues: str | None = None,
            env: dict | None = None,
            concurrency: int = 1,
            envs: dict[str, dict] | None = None,
        ) -> dict[str, live.Process]:
            """Start the workers ``names`` side by side (their imports overlap), then wait for each;
            ``envs`` adds variables for some of them by name (``envs={"plug": {...}}``)."""
            from django.conf import settings

            since = timezone.now()  # a worker restarted under the same name must beat anew
            queues = queues or settings.FEDWEB_QUEUES[0]
            extra = envs or {}
            procs = {
                n: live.start_worker({**live_env, **(env or {}), **extra.get(n, {})}, tmp_path, n, queues, concurrency)
                for n in names
            }
            started.extend(procs.values())
            for name, proc in procs.items():
                ready = Worker.objects.filter(hostname__startswith=f"{name}@", last_heartbeat__gte=since)
                try:
                    live.wait_for(ready.exists, 60, f"worker {name}")
                except TimeoutError:
                    raise AssertionError(f"worker {name} did not start:\n{proc.output()}") from None
            return procs

    yield Workers()
    live.kill_all(started)


@pytest.fixture
def daphne(live_env, tmp_path):
    """A real daphne server; yields its base URL without scheme (``127.0.0.1:PORT``)."""
    port = live.free_port()
    proc = live.start_daphne(live_env, tmp_path, port, wait=True)
    yield f"127.0.0.1:{port}"
    proc.stop()
