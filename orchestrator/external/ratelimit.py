"""The ingestion rate limit: FEDWEB_EXTERNAL_RATE requests per minute per run token (or, on the
MLflow API, per user token), one budget for every web process.

DRF's ``SimpleRateThrottle`` keeps its history in the per-process default cache and writes it back
with a read-modify-write, so N daphne processes (``FEDWEB_WEB_PROCESSES``) gave a token N budgets.
Here the count lives in the ``shared`` cache (Redis, ``settings.CACHES``) and moves by an atomic
``add`` + ``incr``: a window opens at a token's first request and lasts a minute; every request in
it, through any process, counts once. When the shared cache does not answer, the count falls back
to this process's cache for ``FALLBACK_SECONDS`` (a per-process limit, as before) rather than
failing ingestion: the database, not the limit, is what must not lose a round.
"""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.core.cache import caches
from rest_framework import exceptions, throttling

from orchestrator.external.models import ExternalRun

log = logging.getLogger(__name__)

WINDOW_SECONDS = 60
FALLBACK_SECONDS = 30  # how long a process counts alone after the shared cache failed
_shared_down_until = 0.0  # monotonic time; per process


def count(key: str) -> tuple[int, object]:
    """This request's number in ``key``'s current window, and the cache that counted it."""
    global _shared_down_until
    if time.monotonic() >= _shared_down_until:
        shared = caches["shared"]
        try:
            return _count_in(shared, key), shared
        except Exception:  # Redis away or misconfigured: never turn a report into a 500
            log.warning(
                "rate limit: the shared cache failed; counting per process for %s s", FALLBACK_SECONDS, exc_info=True
            )
            _shared_down_until = time.monotonic() + FALLBACK_SECONDS
    local = caches["default"]
    return _count_in(local, key), local


def _count_in(cache, key: str) -> int:
    # Two round trips to Redis in an open window (incr's EXISTS + INCR); the window's start is
    # written when it opens and read only for a refusal's Retry-After.
    for _ in range(3):  # the window may close between a failed incr and add: try again
        try:
            number = cache.incr(key)
        except ValueError:  # no window open: open one with this request
            if cache.add(key, 1, WINDOW_SECONDS):
                cache.set(f"{key}:start", time.time(), WINDOW_SECONDS)
                return 1
        else:
            if number == 1:  # the window ran out between incr's EXISTS and INCR, which made a key with
                cache.touch(key, WINDOW_SECONDS)  # no expiry: without this the token stayed throttled for good
            return number
    raise RuntimeError(f"rate limit: could not count {key}")


def _seconds_left(cache, key: str) -> int:
    start = cache.get(f"{key}:start") or time.time()
    return max(1, math.ceil(start + WINDOW_SECONDS - time.time()))


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
        number, cache = count(key)
        if number <= limit:
            return True
        wait = _seconds_left(cache, key)
        # DRF appends "Expected available in {wait} seconds." and sets Retry-After from ``wait``.
        raise exceptions.Throttled(
            wait=wait, detail=f"Over the limit of {limit} requests per minute for this token (FEDWEB_EXTERNAL_RATE)."
        )
