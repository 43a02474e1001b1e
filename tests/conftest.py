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


@pytest.fixture(autouse=True)
def _isolated(request, settings, tmp_path, monkeypatch):
    settings.FEDWEB_DATA_DIR = tmp_path / "data"
    if request.node.get_closest_marker("integration"):
        return
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    # Unit tests never reach a broker: enqueued rounds are recorded for the test to inspect.
    from workers.tasks import run_round

    sent: list[tuple] = []
    monkeypatch.setattr(run_round, "apply_async", lambda args, **kw: sent.append((tuple(args), kw)))
    request.node.enqueued = sent


@pytest.fixture
def enqueued(request):
    return request.node.enqueued


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


@pytest.fixture
def live_env(redis_url, transactional_db, settings, tmp_path):
    """Environment for worker/daphne subprocesses, and this process pointed at the same Redis.

    A unique key prefix keeps this run's queues and groups apart from anyone sharing the Redis.
    """
    from django.db import connection

    from fedweb.celery import app
    from fedweb.env import redis_urls

    prefix = f"fedweb-test-{uuid.uuid4().hex[:8]}:"
    broker, channels = redis_urls(redis_url)
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [channels], "prefix": f"{prefix}asgi", "capacity": 2000},
        }
    }
    saved = app.conf.broker_url, app.conf.broker_transport_options
    app.conf.broker_url = broker
    app.conf.broker_transport_options = {**saved[1], "global_keyprefix": prefix}
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
        "HEARTBEAT_INTERVAL": "1",
        "CELERY_VISIBILITY_TIMEOUT": "6",
        "CELERY_RESTORE_INTERVAL": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
    }
    settings.CHECKPOINT_EVERY, settings.CHECKPOINT_KEEP = 2, 2
    yield env
    app.conf.broker_url, app.conf.broker_transport_options = saved
    _reset_celery_connections(app)


def _reset_celery_connections(app):
    # Celery caches its connection and producer pools; drop them so the new broker URL is used.
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def workers(live_env, tmp_path):
    """Start Celery workers: ``workers.start("w1")``; all are stopped at the end of the test."""
    from orchestrator.models import Worker

    started: list[live.Process] = []

    class Workers:
        def start(self, name: str = "w1", queues: str = "cpu", env: dict | None = None) -> live.Process:
            """Start worker ``name``; ``env`` adds variables to its environment (e.g. FEDWEB_PLUGINS)."""
            proc = live.start_worker({**live_env, **(env or {})}, tmp_path, name, queues)
            started.append(proc)
            try:
                live.wait_for(
                    lambda: Worker.objects.filter(hostname__startswith=f"{name}@").exists(), 60, f"worker {name}"
                )
            except TimeoutError:
                raise AssertionError(f"worker {name} did not start:\n{proc.output()}") from None
            return proc

    yield Workers()
    for proc in started:
        proc.stop()


@pytest.fixture
def daphne(live_env, tmp_path):
    """A real daphne server; yields its base URL without scheme (``127.0.0.1:PORT``)."""
    port = live.free_port()
    proc = live.start_daphne(live_env, tmp_path, port, wait=True)
    yield f"127.0.0.1:{port}"
    proc.stop()
