from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import caches
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.accounts.world import fast_password_hashing  # noqa: F401  (autouse)

# The client is its own package (clients/python), installed with pip by its users; tests import it
# from the source tree.
CLIENT_SRC = str(Path(__file__).resolve().parents[2] / "clients" / "python")
if CLIENT_SRC not in sys.path:
    sys.path.insert(0, CLIENT_SRC)


IN_PROCESS_CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # The rate limit's shared cache, in this process: no test run counts in another one's Redis.
    # The live tests' daphne processes use the real one (tests/external/test_rate_limit_live.py).
    "shared": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "shared"},
}


@pytest.fixture(autouse=True)
def _fresh_throttle(settings):
    settings.CACHES = IN_PROCESS_CACHES
    for alias in IN_PROCESS_CACHES:
        caches[alias].clear()  # the per-token request counts (cleared before each test, not after:
        # a test may leave a cache pointed at a Redis that is not there)


def user_client(username: str) -> APIClient:
    user = get_user_model().objects.create_user(username, password="pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    client.user = user
    return client


def run_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def alice():
    return user_client("alice")


@pytest.fixture
def run(alice):
    """An external run of alice's: (its id, a client holding its run token)."""
    r = alice.post("/api/external/runs/", {"name": "ext", "config": {"lr": 0.1, "model": {"width": 8}}}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"], run_client(r.json()["token"])


def post_rounds(client, pk: int, *items):
    return client.post(f"/api/external/runs/{pk}/rounds/", {"rounds": list(items)}, format="json")
