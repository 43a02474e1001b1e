from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from orchestrator.models import Experiment, Worker


def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis and live workers. 200 when the database and Redis answer, else 503."""
    checks = {"database": _check_database(), "redis": _check_redis()}
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
    import redis
    from django.conf import settings

    try:
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        return "ok"
    except Exception as e:
        return f"error: {e}"


@login_required
def index(request: HttpRequest) -> HttpResponse:
    # A plain list until the dashboard (issue 4) replaces it.
    experiments = [e for e in Experiment.objects.select_related("owner") if e.can_view(request.user)]
    return render(request, "orchestrator/index.html", {"experiments": experiments, "workers": Worker.objects.all()})
