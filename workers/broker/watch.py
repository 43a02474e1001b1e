"""Notices that Redis, the broker, restarted empty (a redeploy, a crash): the round messages it held
are gone, and without this the rounds they carried would wait for the resend timeouts
(``WORKER_LOST_AFTER`` with an idle worker, ``ROUND_RESEND_AFTER`` otherwise), a minute or more.

Every heartbeat reads the broker's ``run_id`` (``INFO server``: a new one at every Redis start) and
compares it with the run ids the workers recorded at their last beats (``Worker.broker_run_id``, in
the database, so a worker restarted with Redis notices too). Another one means Redis started since;
its start (now − ``uptime_in_seconds``) is then handed to the reconciler, which sends again, at
once, every round and shard sent before it that no process has claimed, and says so in the run's
log. A round sent after the start is in the new Redis and is left alone; a round sent twice is
harmless (the claim arbitrates). RabbitMQ keeps durable queues across restarts: not watched.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.utils import timezone

from orchestrator.fleet.workers import Worker

log = logging.getLogger(__name__)
_client: redis.Redis | None = None


def broker_identity() -> tuple[str, datetime] | None:
    """The Redis broker's run id and when it started; None for another broker, or while it is away."""
    global _client
    url = settings.CELERY_BROKER_URL
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    if _client is None:
        _client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        info = _client.info("server")
    except redis.RedisError:
        return None  # away: the beat after it comes back tells
    return str(info["run_id"]), timezone.now() - timedelta(seconds=int(info["uptime_in_seconds"]))


def restarted_since(hostname: str) -> datetime | None:
    """When the broker last started, if it restarted since a worker's last recorded beat (else None),
    after recording the run id this worker sees now."""
    identity = broker_identity()
    if identity is None:
        return None
    run_id, started = identity
    seen = set(Worker.objects.exclude(broker_run_id="").values_list("broker_run_id", flat=True))
    Worker.objects.filter(hostname=hostname).update(broker_run_id=run_id)
    if seen - {run_id}:
        log.warning("the broker restarted at %s (run id %s): rounds sent before it go again", started, run_id)
        return started
    return None
