"""Fleet metrics for Prometheus, served by the web process at ``/metrics``.

Every number comes from the database, the source of truth, read at scrape time:

- state (queue depth, experiments by status, worker liveness, GPU memory from heartbeats) is
  queried as it is now;
- rounds (``fedweb_rounds_total`` and ``fedweb_round_duration_seconds``) are the ``RoundMetric``
  rows recorded since this process started, tallied incrementally by ``RoundTally``.

Why rounds are not counted inside the workers: the pool child that runs a round can be killed
at any moment (SIGKILL, OOM) and a round can be delivered twice; a row in ``RoundMetric`` exists
exactly once per recorded round (a unique constraint), whoever recorded it and whatever died
afterwards. Counting rows gives one scrape target with the fleet's totals, needs no
``PROMETHEUS_MULTIPROC_DIR`` in the workers, and loses nothing when a worker dies between scrapes.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db.models import Count, Max
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.candidates import policy_for
from orchestrator.fleet.queues import queue_states
from orchestrator.fleet.workers import Worker

# Rounds last from milliseconds (tiny CPU runs) to many minutes (large GPU cohorts).
ROUND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
# A row id seen this long ago has no uncommitted row with a smaller id left (a round is stored in
# one autocommit INSERT of milliseconds; PostgreSQL hands out ids before commit, so order can differ).
SETTLE_S = 60.0
MB = 2**20


@dataclass
class _Series:
    buckets: list[int] = field(default_factory=lambda: [0] * len(ROUND_BUCKETS))
    count: int = 0
    total_seconds: float = 0.0

    def observe(self, seconds: float) -> None:
        self.count += 1
        self.total_seconds += seconds
        for i, bound in enumerate(ROUND_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1
                break

    def cumulative(self) -> list[tuple[str, int]]:
        running, out = 0, []
        for bound, n in zip(ROUND_BUCKETS, self.buckets, strict=True):
            running += n
            out.append((str(bound), running))
        return [*out, ("+Inf", self.count)]


class RoundTally:
    """Rounds recorded since this process's first scrape, per (queue, device), from ``RoundMetric``.

    A counter that never goes down: deleting an experiment deletes its rows but not their count
    here (a drop would read as a counter reset, and ``rate()`` would report a burst of rounds).
    Each scrape reads only the rows after a cursor; rows are observed once by id.
    """

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._cursor: int | None = None  # every row with id <= cursor has been counted (or never will be)
        self._seen: dict[int, float] = {}  # ids above the cursor already counted -> when first seen
        self.series: dict[tuple[str, str], _Series] = {}

    def update(self) -> None:
        """Count the rows recorded since the last call (the first call only sets the starting point)."""
        with self._lock:
            if self._cursor is None:
                self._cursor = RoundMetric.objects.aggregate(top=Max("id"))["top"] or 0
                return
            now = self._clock()
            rows = RoundMetric.objects.filter(id__gt=self._cursor).order_by("id")
            for pk, seconds, device, queue in rows.values_list("id", "round_seconds", "device", "experiment__queue"):
                if pk not in self._seen:
                    self._seen[pk] = now
                    self.series.setdefault((queue or "", device), _Series()).observe(seconds)
            self._advance(now)

    def _advance(self, now: float) -> None:
        settled = [pk for pk, seen in self._seen.items() if now - seen >= SETTLE_S]
        if settled:
            self._cursor = max(self._cursor or 0, *settled)
            self._seen = {pk: seen for pk, seen in self._seen.items() if pk > self._cursor}

    def metrics(self) -> list[Metric]:
        with self._lock:
            items = sorted(self.series.items())
        rounds = CounterMetricFamily(
            "fedweb_rounds", "Rounds recorded (stored in the database)", labels=["queue", "device"]
        )
        durations = HistogramMetricFamily(
            "fedweb_round_duration_seconds", "Wall time of a recorded round, as the engine measured it",
            labels=["queue", "device"],
        )  # fmt: skip
        for (queue, device), series in items:
            rounds.add_metric([queue, device], series.count)
            durations.add_metric([queue, device], series.cumulative(), series.total_seconds)
        return [rounds, durations]


class FleetCollector:
    """The fleet as the database sees it now, plus the round tally. One instance per process."""

    def __init__(self, tally: RoundTally | None = None):
        self.tally = tally or RoundTally()

    def collect(self) -> Iterable[Metric]:
        self.tally.update()
        yield from queue_metrics()
        yield experiment_metrics()
        yield from worker_metrics()
        yield from self.tally.metrics()


def queue_metrics() -> list[Metric]:
    """Depth (experiments queued or running, as on the Workers page) and live workers per queue."""
    depth = GaugeMetricFamily(
        "fedweb_queue_depth", "Experiments queued or running on the queue", labels=["queue", "policy"]
    )
    live = GaugeMetricFamily("fedweb_queue_live_workers", "Live workers serving the queue", labels=["queue", "policy"])
    for state in queue_states():
        labels = [state.name, policy_for(state.name)]
        depth.add_metric(labels, state.depth)
        live.add_metric(labels, len(state.workers))
    return [depth, live]


def experiment_metrics() -> Metric:
    """Experiments per status; every status is present (0 when none), so a panel never has gaps."""
    counts = dict(Experiment.objects.values_list("status").annotate(n=Count("id")).order_by())
    family = GaugeMetricFamily("fedweb_experiments", "Experiments by status", labels=["status"])
    for status in Status.values:
        family.add_metric([status], counts.get(status, 0))
    return family


def worker_metrics() -> list[Metric]:
    """Liveness and heartbeat time of every worker row, and the GPU memory live workers report."""
    up = GaugeMetricFamily(
        "fedweb_worker_up", "1 when the worker's heartbeat is within WORKER_LOST_AFTER", labels=["worker", "queue"]
    )
    beat = GaugeMetricFamily(
        "fedweb_worker_last_heartbeat_timestamp_seconds", "Unix time of the worker's last heartbeat", labels=["worker"]
    )
    busy = GaugeMetricFamily("fedweb_worker_busy", "1 while the worker runs a round", labels=["worker"])
    used = GaugeMetricFamily(
        "fedweb_gpu_memory_used_bytes", "GPU memory in use (NVML, last heartbeat)", labels=["worker", "gpu", "name"]
    )
    total = GaugeMetricFamily(
        "fedweb_gpu_memory_total_bytes", "GPU memory in total (NVML, last heartbeat)", labels=["worker", "gpu", "name"]
    )
    for worker in Worker.objects.order_by("hostname"):
        alive = not worker.is_lost
        up.add_metric([worker.hostname, worker.queue], 1 if alive else 0)
        beat.add_metric([worker.hostname], worker.last_heartbeat.timestamp())
        busy.add_metric([worker.hostname], 1 if alive and worker.current_experiment_id else 0)
        if alive:  # a lost worker's last figures would be stale: leave them out
            add_gpu_memory(used, total, worker.hostname, worker.devices or [])
    return [up, beat, busy, used, total]


def add_gpu_memory(used: GaugeMetricFamily, total: GaugeMetricFamily, worker: str, devices: list[dict]) -> None:
    """One sample per GPU of a heartbeat's ``devices`` list (``{"index", "name", "used_mb", "total_mb"}``)."""
    for position, device in enumerate(devices):
        labels = [worker, str(device.get("index", position)), str(device.get("name", ""))]
        if device.get("used_mb") is not None:
            used.add_metric(labels, float(device["used_mb"]) * MB)
        if device.get("total_mb") is not None:
            total.add_metric(labels, float(device["total_mb"]) * MB)


def token_matches(authorization: str, token: str) -> bool:
    """Does an ``Authorization`` header carry ``Bearer <token>``? Constant-time comparison."""
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), token.encode())
