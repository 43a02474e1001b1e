import pytest

from fedweb.celery import app
from orchestrator.fleet.workers import Worker
from tests import live
from tests.conftest import RABBITMQ_URL

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker_url(settings):
    """Point /healthz's broker check at another URL for one test (Celery caches its pools)."""
    saved = app.conf.broker_url, settings.CELERY_BROKER_URL

    def use(url: str) -> None:
        settings.CELERY_BROKER_URL = app.conf.broker_url = url
        app._pool = None

    yield use
    app.conf.broker_url, settings.CELERY_BROKER_URL = saved
    app._pool = None


@pytest.mark.integration
def test_it_reports_health_against_a_real_redis(client, settings, redis_url):
    settings.REDIS_URL = redis_url  # the test Redis (REDIS_URL, else the embedded one): really pinged
    Worker.objects.create(hostname="w1@box", queue="cpu")
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["database"] == "ok" and body["redis"] == "ok" and body["workers"] == 1
    assert "broker" not in body  # the broker is that Redis
    assert body["live_workers"][0]["hostname"] == "w1@box"


def test_it_answers_503_when_redis_is_down(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{live.free_port()}/0"  # a port nothing listens on
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"].startswith("error")


@pytest.mark.integration
def test_it_reports_a_real_rabbitmq_broker(client, settings, redis_url, broker_url):
    if not live.amqp_answers(RABBITMQ_URL):
        live.skip_for_missing_service("RabbitMQ", f"nothing answers at {RABBITMQ_URL}")
    settings.REDIS_URL = redis_url
    broker_url(RABBITMQ_URL)
    response = client.get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["broker"] == "ok" and body["redis"] == "ok"


def test_it_answers_503_when_the_rabbitmq_broker_is_down(client, settings, broker_url):
    settings.REDIS_URL = f"redis://127.0.0.1:{live.free_port()}/0"
    broker_url(f"amqp://guest:guest@127.0.0.1:{live.free_port()}//")  # nothing listens there
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["broker"].startswith("error")


def test_it_requires_login_for_the_index(client, user):
    assert client.get("/").status_code == 302
    client.force_login(user)
    assert client.get("/").status_code == 200
