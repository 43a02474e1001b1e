"""Who may scrape: the web /metrics view, the worker endpoint, and the settings that configure them."""

import urllib.error
import urllib.request

import pytest
from django.core.exceptions import ImproperlyConfigured
from prometheus_client import CollectorRegistry, Gauge

from fedweb import env
from fedweb.localredis import free_port
from tests.fleet.metrics_helpers import parse, value
from workers.exporter import serve

TOKEN = "s3cret-metrics-token-0123"


@pytest.mark.django_db
def test_it_serves_prometheus_text_to_loopback_without_a_token(client, settings):
    settings.FEDWEB_METRICS_TOKEN = ""
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    assert value(parse(response.content.decode()), "fedweb_experiments", status="draft") == 0
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200


@pytest.mark.django_db
def test_it_refuses_other_addresses_without_a_token(client, settings):
    settings.FEDWEB_METRICS_TOKEN = ""
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 403
    assert b"FEDWEB_METRICS_TOKEN" in response.content


@pytest.mark.django_db
def test_it_requires_the_bearer_token_from_everyone_when_one_is_set(client, settings):
    settings.FEDWEB_METRICS_TOKEN = TOKEN
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401  # loopback too: proxies look local
    wrong = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401 and wrong["WWW-Authenticate"].startswith("Bearer")
    right = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert right.status_code == 200 and b"fedweb_queue_depth" in right.content


@pytest.mark.django_db
def test_it_answers_503_when_the_database_is_unavailable(client, settings, monkeypatch):
    from django.db import OperationalError

    from orchestrator.fleet import prometheus

    def broken():
        raise OperationalError("database is locked")

    monkeypatch.setattr(prometheus, "experiment_metrics", broken)
    response = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 503 and b"database is locked" in response.content


def test_it_reads_the_worker_metrics_address(monkeypatch):
    name = "FEDWEB_WORKER_METRICS_PORT"
    monkeypatch.delenv(name, raising=False)
    assert env.env_listen_address(name) is None
    for raw, expected in [
        ("9101", ("127.0.0.1", 9101)),
        ("0.0.0.0:9101", ("0.0.0.0", 9101)),
        ("[::]:9102", ("::", 9102)),
    ]:
        monkeypatch.setenv(name, raw)
        assert env.env_listen_address(name) == expected
    for bad in ["ninety", "70000", "0", ":9101", "host:"]:
        monkeypatch.setenv(name, bad)
        with pytest.raises(ImproperlyConfigured, match=name):
            env.env_listen_address(name)


def test_it_rejects_a_short_metrics_token(monkeypatch):
    monkeypatch.setenv("FEDWEB_METRICS_TOKEN", "short")
    with pytest.raises(ImproperlyConfigured, match="FEDWEB_METRICS_TOKEN must be at least 16"):
        env.env_token("FEDWEB_METRICS_TOKEN")
    monkeypatch.setenv("FEDWEB_METRICS_TOKEN", "")
    assert env.env_token("FEDWEB_METRICS_TOKEN") == ""


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_it_serves_a_worker_endpoint_on_the_next_free_port_behind_the_token():
    registry = CollectorRegistry()
    Gauge("fedweb_probe", "a probe", registry=registry).set(7)
    port = free_port()
    first = serve(registry, "127.0.0.1", port, TOKEN)
    second = serve(registry, "127.0.0.1", port, "")  # another worker on the host: port + 1
    try:
        assert first.server_address[1] == port and second.server_address[1] == port + 1
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 401
        status, body = _get(f"http://127.0.0.1:{port}/metrics", TOKEN)
        assert status == 200 and value(parse(body), "fedweb_probe") == 7
        assert value(parse(_get(f"http://127.0.0.1:{port + 1}/metrics")[1]), "fedweb_probe") == 7
    finally:
        first.shutdown()
        second.shutdown()
        first.server_close()
        second.server_close()
