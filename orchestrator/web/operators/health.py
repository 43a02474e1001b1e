"""``/healthz``: is every part FedWeb needs answering? For load balancers and ``docker compose``."""

from __future__ import annotations

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from fedweb.celery import app
from orchestrator.fleet.workers import Worker


def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis, the broker (when it is not that Redis) and live workers.
    200 when all answer, else 503."""
    checks = {"database": _check_database(), "redis": _check_redis()}
    if not settings.CELERY_BROKER_URL.startswith(("redis", "unix")):
        checks["broker"] = _check_broker()
    live = list(Worker.live().values("hostname", "queue", "last_heartbeat")) if checks["database"] == "ok" else []
    ok = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if ok else "error", **checks, "workers": len(live), "live_workers": live}
    return JsonResponse(body, status=200 if ok else 503)


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as e:
        return f"error: {e}"


def _check_redis() -> str:
    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        return "ok"
    except Exception as e:
        return f"error: {e}"


def _check_broker() -> str:
    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as e:
        return f"error: {e}"
