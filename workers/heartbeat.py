"""Worker heartbeats: every few seconds a worker records itself, its queues, its GPUs and its
plugins (``registry.installed_plugins()``: what routing matches experiments against), renews
the leases of the rounds its processes are running, re-sends rounds that were lost
(``orchestrator.fleet.scheduling.reconcile``), so a dead worker's round restarts within
``WORKER_LOST_AFTER`` seconds on any live worker, a round lost with a broker that restarted empty
goes again within a beat (``workers.broker.watch``), and marks external runs that went silent
crashed (``orchestrator.external.liveness``; pages also check on read).

Runs as a daemon thread in the worker's main process, started by Celery's ``worker_ready``
signal. GPUs are read through NVML (workers.gpus), never ``torch.cuda``: initialising CUDA in the
parent would break the forked pool process that runs the rounds.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta

import psutil
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from fedweb_engine.components.registry import installed_plugins
from orchestrator.external import liveness
from orchestrator.fleet import gangs, scheduling
from orchestrator.fleet.queues import queue_states
from orchestrator.fleet.workers import Worker
from orchestrator.live import events
from workers.broker import watch as broker_watch
from workers.gpus import gpu_devices

log = logging.getLogger(__name__)
_stop = threading.Event()
last_beat: float | None = None  # Unix time of this process's last heartbeat that got through (metrics)


@worker_ready.connect
def _start(sender, **kwargs):
    hostname = sender.hostname
    queues = served_queues(sender.app)
    slots = getattr(sender.pool, "num_processes", None) or 1  # --concurrency: rounds it runs at once
    _stop.clear()
    _forget_previous_life(hostname)
    threading.Thread(target=_loop, args=(hostname, queues, slots), name="fedweb-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _shutdown(**kwargs):
    _stop.set()


def served_queues(app) -> str:
    """The queues a worker serves, comma-separated: what it consumes, less its own direct queue
    (worker_direct: packed rounds sent to it alone), which it serves for nobody else."""
    consumed = app.amqp.queues.consume_from or app.amqp.queues
    return ",".join(sorted(q for q in consumed if not q.endswith(".dq2")))


def _forget_previous_life(hostname: str) -> None:
    """A worker restarted under the same name runs nothing yet, whatever its dead self held."""
    try:
        Worker.objects.filter(hostname=hostname).update(current_experiment=None)
        gangs.forget_leader(hostname)
    except Exception:
        log.warning("could not reset this worker's row", exc_info=True)
    finally:
        close_old_connections()


def _loop(hostname: str, queues: str, slots: int) -> None:
    global last_beat
    while True:
        try:
            beat(hostname, queues, slots)
            last_beat = time.time()
        except Exception:  # the database may be away for a moment; try again next beat
            log.warning("heartbeat failed", exc_info=True)
        finally:
            close_old_connections()
        if _stop.wait(settings.HEARTBEAT_INTERVAL):
            return


def beat(hostname: str, queues: str, slots: int = 1):
    worker, _ = Worker.objects.update_or_create(
        hostname=hostname,
        defaults={
            "queue": queues, "slots": slots, "devices": gpu_devices(), "plugins": installed_plugins(),
            "last_heartbeat": timezone.now(),
        },
    )  # fmt: skip
    # Only rounds run by processes alive under this one keep their lease: a pool child that died
    # (OOM-killed) stops renewing at once, and so does a worker restarted under the same name.
    scheduling.renew_leases(hostname, _live_pids())
    events.publish_worker(worker)
    if _publishes_queues(hostname):
        queue_table.publish_if_changed(time.monotonic())  # the Workers page's queue table has no other event
    # After the broker restarted empty, the rounds it held go again now, not after the resend timeouts.
    scheduling.reconcile(broker_since=broker_watch.restarted_since(hostname))
    liveness.mark_crashed()  # external runs gone silent, even while nobody opens a page
    return worker


def _live_pids() -> list[int]:
    me = psutil.Process()
    return [me.pid, *(child.pid for child in me.children(recursive=True))]


# The broker's message counts (one connection to the broker) are read at most this often; the
# database's counts, which say when runs queue, start and finish, are read every beat.
BROKER_READ_SECONDS = 30.0


class QueueTable:
    """The queue table as this worker last sent it, and the broker counts it last read: a beat
    sends the table only when it differs from the last one sent, so with nothing changing a fleet
    sends nothing and opens a broker connection once per ``BROKER_READ_SECONDS``."""

    def __init__(self) -> None:
        self.sent: list[dict] | None = None
        self.messages: dict[str, int | None] = {}
        self.read_at: float | None = None

    def publish_if_changed(self, now: float) -> bool:
        """Send the table if it changed since the last one sent (``now``: a monotonic clock)."""
        read = self.read_at is None or now - self.read_at >= BROKER_READ_SECONDS
        states = queue_states(broker=read)
        if read:
            self.messages, self.read_at = {q.name: q.messages for q in states}, now
        table = [{**q.to_dict(), "messages": self.messages.get(q.name)} for q in states]
        if table == self.sent:
            return False
        events.publish_queues(table)
        self.sent = table
        return True


queue_table = QueueTable()


def _publishes_queues(hostname: str) -> bool:
    """Whether this worker sends the queue table this beat. Reading the broker's counts opens a
    connection, so one worker does it for the fleet: the first by name among those that beat within
    the last two intervals (a dead one is passed over after two intervals, not WORKER_LOST_AFTER)."""
    cutoff = timezone.now() - timedelta(seconds=2 * settings.HEARTBEAT_INTERVAL)
    first = Worker.objects.filter(last_heartbeat__gte=cutoff).order_by("hostname").values_list("hostname", flat=True)
    return first.first() in (None, hostname)
