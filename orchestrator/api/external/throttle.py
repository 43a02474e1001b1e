"""The ingestion rate limit: FEDWEB_EXTERNAL_RATE requests per minute per run token (or, on the
MLflow API, per user token), one budget for every web process.

DRF's ``SimpleRateThrottle`` keeps its history in the per-process default cache and writes it back
with a read-modify-write, so N daphne processes (``FEDWEB_WEB_PROCESSES``) gave a token N budgets.
Here the count lives in the ``shared`` cache (Redis, ``settings.CACHES``): a window opens at a
token's first request and lasts a minute; every request in it, through any process, counts once.
On Redis one MULTI (open the window if none, INCR, TTL) counts a request in one round trip and
tells when the window ends; other caches count with ``add`` + ``incr``. When the shared cache does not answer, the count falls back
to this process's cache for ``FALLBACK_SECONDS`` (a per-process limit) rather than
failing ingestion: the database, not the limit, is what must not lose a round.
"""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from rest_framework import exceptions, throttling

from orchestrator.external.models import ExternalRun

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60
FALLBACK_SECONDS = 30  # how long a process counts alone after the shared cache failed
_shared_down_until = 0.0  # monotonic time; per process


def count(key: str) -> tuple[int, int]:
    """This request's number in ``key``'s current window, and the seconds until the window ends."""
    global _shared_down_until
    if time.monotonic() >= _shared_down_until:
        try:
            return _count_in(caches["shared"], key)
        except Exception:  # Redis away or misconfigured: never turn a report into a 500
            log.warning(
                "rate limit: the shared cache failed; counting per process for %s s", FALLBACK_SECONDS, exc_info=True
            )
            _shared_down_until = time.monotonic() + FALLBACK_SECONDS
    return _count_in(caches["default"], key)


def _count_in(cache, key: str) -> tuple[int, int]:
    if isinstance(cache, RedisCache):
        return _count_in_redis(cache, key)
    for _ in range(3):  # the window may close between a failed incr and add: try again
        try:
            number = cache.incr(key)
        except ValueError:  # no window open: open one with this request
            if cache.add(key, 1, WINDOW_SECONDS):
                cache.set(f"{key}:start", time.time(), WINDOW_SECONDS)
                return 1, WINDOW_SECONDS
        else:
            start = cache.get(f"{key}:start") or time.time()
            return number, max(1, math.ceil(start + WINDOW_SECONDS - time.time()))
    raise RuntimeError(f"rate limit: could not count {key}")


def _count_in_redis(cache: RedisCache, key: str) -> tuple[int, int]:
    # One round trip, atomic: open the window with its expiry if none is open, count, read what is left.
    # (Django's incr is EXISTS then INCR, and a window ending between them left a key with no expiry.)
    name = cache.make_and_validate_key(key)
    pipe = cache._cache.get_client(key, write=True).pipeline(transaction=True)
    pipe.set(name, 0, ex=WINDOW_SECONDS, nx=True)
    pipe.incr(name)
    pipe.ttl(name)
    _, number, left = pipe.execute()
    if left < 0:  # a key without expiry (written by another client): give it this window's
        cache._cache.get_client(key, write=True).expire(name, WINDOW_SECONDS)
        left = WINDOW_SECONDS
    return number, max(1, left)


class RunTokenThrottle(throttling.BaseThrottle):
    """FEDWEB_EXTERNAL_RATE requests per minute per run token; beyond it a 429 whose detail names
    the limit, with Retry-After (seconds until the window ends)."""

    scope = "external_run"

    def ident(self, request) -> str | None:
        return f"run-{request.auth.pk}" if isinstance(request.auth, ExternalRun) else None

    def allow_request(self, request, view) -> bool:
        ident = self.ident(request)
        if ident is None:
            return True
        limit = settings.FEDWEB_EXTERNAL_RATE
        key = f"throttle:{self.scope}:{ident}"
        number, wait = count(key)
        if number <= limit:
            return True
        # DRF appends "Expected available in {wait} seconds." and sets Retry-After from ``wait``.
        raise exceptions.Throttled(
            wait=wait, detail=f"Over the limit of {limit} requests per minute for this token (FEDWEB_EXTERNAL_RATE)."
        )
