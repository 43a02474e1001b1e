"""A worker's own Prometheus endpoint, on ``FEDWEB_WORKER_METRICS_PORT`` (off when unset).

What only the worker knows, read at scrape time in its main process: the rounds its pool is
running now (Celery's own bookkeeping), the memory of the pool processes that train them, its GPUs'
memory straight from NVML (fresher than the last heartbeat) and when its last heartbeat got through.
Nothing is counted inside the pool children, so a child killed mid-round loses no figure; the
fleet's round counts come from the database, at the web process's ``/metrics``.

Several workers on one host: the first takes the port, the next finds it taken and uses the next
one up (+1, +2, ... up to +63); each serves a ``worker`` label, so which port it got never matters.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
from collections.abc import Iterable
from wsgiref.simple_server import WSGIRequestHandler, make_server

import psutil
from celery.signals import worker_ready, worker_shutdown
from celery.worker import state
from django.conf import settings
from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer

from orchestrator.fleet.prometheus import add_gpu_memory, token_matches
from workers import heartbeat
from workers.heartbeat import served_queues

log = logging.getLogger(__name__)
PORT_TRIES = 64
_servers: list[ThreadingWSGIServer] = []


class WorkerCollector:
    """Metrics of the worker whose main process this is."""

    def __init__(self, hostname: str, queues: str):
        self.hostname = hostname
        self.queues = queues

    def collect(self) -> Iterable[Metric]:

        labels = [self.hostname]
        info = GaugeMetricFamily("fedweb_worker_info", "This worker and its queues", labels=["worker", "queues"])
        info.add_metric([self.hostname, self.queues], 1)
        yield info
        yield _gauge("fedweb_worker_active_rounds", "Rounds this worker's pool is running now", labels, active_rounds())
        yield _gauge(
            "fedweb_worker_pool_rss_bytes", "Resident memory of the processes that run rounds", labels, pool_rss_bytes()
        )
        if heartbeat.last_beat is not None:
            yield _gauge(
                "fedweb_worker_last_heartbeat_timestamp_seconds",
                "Unix time of this worker's last heartbeat that reached the database", labels, heartbeat.last_beat,
            )  # fmt: skip
        used = GaugeMetricFamily(
            "fedweb_worker_gpu_memory_used_bytes", "GPU memory in use (NVML, now)", labels=["worker", "gpu", "name"]
        )
        total = GaugeMetricFamily(
            "fedweb_worker_gpu_memory_total_bytes", "GPU memory in total (NVML)", labels=["worker", "gpu", "name"]
        )
        add_gpu_memory(used, total, self.hostname, heartbeat.gpu_devices())
        yield used
        yield total


def _gauge(name: str, documentation: str, labels: list[str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, documentation, labels=["worker"])
    family.add_metric(labels, value)
    return family


def active_rounds() -> int:
    """Rounds accepted by this worker's pool and not yet finished (Celery's state, main process)."""
    return sum(1 for request in list(state.active_requests) if request.name == "workers.tasks.run_round")


def pool_rss_bytes() -> int:
    """Resident memory of every process below this one (pool children, isolated training children)."""
    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # it exited while we looked
            continue
    return total


def metrics_app(registry: CollectorRegistry, token: str):
    """The WSGI app: the registry's metrics, behind ``Authorization: Bearer <token>`` when a token is set."""
    inner = make_wsgi_app(registry)

    def app(environ, start_response):
        if token and not token_matches(environ.get("HTTP_AUTHORIZATION", ""), token):
            start_response("401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")])
            return [b"a bearer token is required (FEDWEB_METRICS_TOKEN)\n"]
        return inner(environ, start_response)

    return app


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # a scrape every few seconds is not news
        pass


def serve(registry: CollectorRegistry, host: str, port: int, token: str) -> ThreadingWSGIServer:
    """Serve on ``port``, or the first free port above it; the server runs in a daemon thread."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
    app = metrics_app(registry, token)
    for candidate in range(port, min(port + PORT_TRIES, 65536)):
        try:
            server = make_server(host, candidate, app, server_class=server_class, handler_class=_QuietHandler)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            continue
        threading.Thread(target=server.serve_forever, name="fedweb-metrics", daemon=True).start()
        return server
    raise OSError(errno.EADDRINUSE, f"ports {port}-{port + PORT_TRIES - 1} on {host} are all taken")


@worker_ready.connect
def _start(sender, **kwargs):
    address = settings.FEDWEB_WORKER_METRICS_ADDRESS
    if address is None:
        return
    queues = served_queues(sender.app)
    registry = CollectorRegistry()
    registry.register(WorkerCollector(sender.hostname, queues))
    ProcessCollector(registry=registry)  # the main process; the pool's memory is in the collector
    # Pool children forked later inherit the listening socket but never accept on it.
    server = serve(registry, *address, settings.FEDWEB_METRICS_TOKEN)
    _servers.append(server)
    host, port = server.server_address[:2]
    log.info("metrics for %s at http://%s:%s/metrics", sender.hostname, host, port)


@worker_shutdown.connect
def _stop(**kwargs):
    while _servers:
        _servers.pop().shutdown()
