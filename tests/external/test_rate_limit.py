"""The ingestion rate limit per token is one budget for every web process (orchestrator/api/external/throttle.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.core.cache.backends.redis import RedisCache
from django.test import override_settings
from rest_framework.authtoken.models import Token

from fedweb.redis_cache import RedisCache as SharedRedisCache
from orchestrator.api.external import throttle
from orchestrator.experiments.records import RoundMetric
from tests import live
from tests.external.conftest import post_rounds

pytestmark = pytest.mark.django_db


@pytest.fixture
def fresh_fallback():
    throttle._shared_down_until = 0.0
    yield
    throttle._shared_down_until = 0.0


@override_settings(FEDWEB_EXTERNAL_RATE=2)
def test_it_names_the_limit_in_the_429(run):
    pk, client = run
    assert [post_rounds(client, pk, {"round": n, "metrics": {}}).status_code for n in (1, 2)] == [201, 201]
    r = post_rounds(client, pk, {"round": 3, "metrics": {}})
    assert r.status_code == 429, r.content
    detail = r.json()["detail"]
    assert "2 requests per minute" in detail and "FEDWEB_EXTERNAL_RATE" in detail, detail
    assert 1 <= int(r["Retry-After"]) <= throttle.WINDOW_SECONDS


def test_it_counts_in_this_process_when_the_shared_cache_is_away(settings, run, fresh_fallback):
    pk, client = run
    settings.FEDWEB_EXTERNAL_RATE = 2
    nothing_there = f"redis://127.0.0.1:{live.free_port()}/0"
    settings.CACHES = {
        **settings.CACHES,
        "shared": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": nothing_there},
    }
    codes = [post_rounds(client, pk, {"round": n, "metrics": {}}).status_code for n in (1, 2, 3)]
    assert codes == [201, 201, 429]  # no 500: the limit still holds, per process
    assert throttle._shared_down_until > 0


@pytest.mark.integration
def test_two_cache_clients_count_into_one_window(redis_url, fresh_fallback):
    # Two clients with their own connection pools, as two web processes have.
    params = {"KEY_PREFIX": f"fedweb-test-{uuid.uuid4().hex[:8]}"}
    one, two = RedisCache(redis_url, params), RedisCache(redis_url, params)
    counted = [throttle._count_in(c, "throttle:test:run-1") for c in (one, two, one, two, two)]
    assert [number for number, _ in counted] == [1, 2, 3, 4, 5]
    # the seconds left in the window (the 429's Retry-After) come with the count
    assert all(0 < left <= throttle.WINDOW_SECONDS for _, left in counted), counted
    one.delete("throttle:test:run-1")


def test_a_window_that_ran_out_inside_incr_still_expires(redis_url, fresh_fallback):
    # Django's RedisCache.incr is EXISTS then INCR: a window expiring between the two lets INCR make the
    # key anew with no expiry. Simulated here by a key with no TTL and the value INCR would leave.
    cache = RedisCache(redis_url, {"KEY_PREFIX": f"fedweb-test-{uuid.uuid4().hex[:8]}"})
    key = "throttle:test:run-2"
    cache.set(key, 0, None)  # no expiry, as a key INCR creates
    assert throttle._count_in(cache, key)[0] == 1
    client = cache._cache.get_client(key)
    assert 0 < client.ttl(cache.make_and_validate_key(key)) <= throttle.WINDOW_SECONDS
    cache.delete(key)


def test_cache_objects_of_one_process_share_their_redis_connections(redis_url):
    # Django makes a cache object per request context: each one's own pool was a new connection per request.
    one, two = (SharedRedisCache(redis_url, {}) for _ in range(2))
    assert one is not two
    assert one._cache._get_connection_pool(write=True) is two._cache._get_connection_pool(write=True)
    other_options = SharedRedisCache(redis_url, {"OPTIONS": {"socket_timeout": 0.25}})
    assert other_options._cache._get_connection_pool(write=True) is not one._cache._get_connection_pool(write=True)


def _post(port: int, path: str, body: dict, auth: str) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": auth},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_web_processes_share_one_budget_per_token(live_env, tmp_path):
    limit = 4
    env = {**live_env, "FEDWEB_EXTERNAL_RATE": str(limit)}
    ports = [live.free_port(), live.free_port()]
    servers = [live.start_daphne(env, tmp_path, port, wait=True) for port in ports]
    try:
        user = get_user_model().objects.create_user("dora", password="pw")
        key = Token.objects.create(user=user).key
        status, created = _post(ports[0], "/api/external/runs/", {"name": "two doors"}, f"Token {key}")
        assert status == 201, created
        pk, bearer = created["id"], f"Bearer {created['token']}"
        answers = [
            (port, *_post(port, f"/api/external/runs/{pk}/rounds/", {"rounds": [{"round": n, "metrics": {}}]}, bearer))
            for n, port in zip(range(1, 2 * limit + 1), ports * limit, strict=True)
        ]
    finally:
        for server in servers:
            server.stop()
    accepted = [(port, body) for port, status, body in answers if status == 201]
    refused = [(port, body) for port, status, body in answers if status == 429]
    # Counted per process, each would have taken `limit`: 2 * limit in all.
    assert len(accepted) == limit and len(refused) == limit, answers
    assert {port for port, _ in accepted} == {port for port, _ in refused} == set(ports), answers
    assert all(f"{limit} requests per minute" in body["detail"] for _, body in refused), refused
    assert RoundMetric.objects.filter(experiment_id=pk).count() == limit
