"""How often a worker's consumer tries to reach a broker that went away: every second or two.

Celery's consumer reconnects through kombu's ``ensure_connection`` with its default back-off (2 s,
then 4, 6, ... up to 30 s between attempts): after a broker outage of a minute, a worker could sit
idle for up to 30 s after the broker was back, while the rounds it must run waited in it. An
attempt is one TCP connect, so trying every ``RETRY_MAX`` seconds costs nothing, and a run resumes
within seconds of the broker's return however long it was away (with ``workers.broker.watch``,
which sends again what the broker lost). Installed in the worker's main process at its start
(``workers.startup``), before the consumer connects.
"""

from __future__ import annotations

import functools

from celery.worker.consumer.consumer import Consumer

RETRY_START, RETRY_STEP, RETRY_MAX = 1.0, 1.0, 2.0  # seconds between attempts: 1, 2, 2, 2 ...
_celery_ensure_connected = Consumer.ensure_connected


def _ensure_connected(self, conn):
    conn.ensure_connection = functools.partial(
        conn.ensure_connection, interval_start=RETRY_START, interval_step=RETRY_STEP, interval_max=RETRY_MAX
    )
    return _celery_ensure_connected(self, conn)


def install() -> None:
    """Make every consumer of this process retry its broker connection with the short back-off."""
    Consumer.ensure_connected = _ensure_connected
