import pytest

from orchestrator.models import Worker
from orchestrator.views import health

pytestmark = pytest.mark.django_db


def test_it_reports_health_as_json(client, monkeypatch):
    monkeypatch.setattr(health, "_check_redis", lambda: "ok")
    Worker.objects.create(hostname="w1@box", queue="cpu")
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["database"] == "ok" and body["redis"] == "ok" and body["workers"] == 1
    assert body["live_workers"][0]["hostname"] == "w1@box"


def test_it_answers_503_when_redis_is_down(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"].startswith("error")


def test_it_requires_login_for_the_index(client, user):
    assert client.get("/").status_code == 302
    client.force_login(user)
    assert client.get("/").status_code == 200
