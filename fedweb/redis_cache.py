"""Django's Redis cache with one connection pool per process, not one per request.

Django makes a cache object per request context (``caches`` is a context-local handler), and its
``RedisCacheClient`` keeps its pools on that object: under daphne every request that touched the
``shared`` cache opened a new TCP connection to Redis, and redis-py looked its own version up in
the installed packages' metadata for each one (about 1 ms of CPU per ingestion report, profiled in
``python -m benchmarks ingest_live``). Here clients with the same servers and options share their
pools, as a WSGI process's one cache object would. redis-py's pools are thread-safe and notice a
fork, so the sharing is safe in daphne's request threads and in forked workers.
"""

from __future__ import annotations

import threading

from django.core.cache.backends import redis as django_redis

_POOLS: dict[str, dict] = {}  # (servers, pool options) -> {pool index: ConnectionPool}
_LOCK = threading.Lock()


class RedisCacheClient(django_redis.RedisCacheClient):
    def __init__(self, servers, **options) -> None:
        super().__init__(servers, **options)
        key = repr((self._servers, self._pool_class, sorted(self._pool_options.items(), key=lambda kv: kv[0])))
        with _LOCK:
            self._pools = _POOLS.setdefault(key, {})

    def _get_connection_pool(self, write):
        with _LOCK:  # two threads asking at once make one pool
            return super()._get_connection_pool(write)


class RedisCache(django_redis.RedisCache):
    """``django.core.cache.backends.redis.RedisCache``, its connection pools shared in the process."""

    def __init__(self, server, params) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
