"""The workers that run rounds, as their heartbeats describe them, and the queue a spec goes to."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from fedweb_engine.spec.schema import Spec


class Worker(models.Model):
    hostname = models.CharField(max_length=255, unique=True)
    queue = models.CharField(max_length=255)
    devices = models.JSONField(default=list, blank=True)  # [{"name", "total_mb", "used_mb"}]
    last_heartbeat = models.DateTimeField(default=timezone.now)
    current_experiment = models.ForeignKey(
        "orchestrator.Experiment", models.SET_NULL, null=True, blank=True, related_name="+"
    )
    slots = models.PositiveIntegerField(default=1)  # rounds it runs at once (its --concurrency)
    sends = models.PositiveIntegerField(default=0)  # bumped per packed send: two schedulers never pack it at once
    plugins = models.JSONField(default=list, blank=True)  # registry.installed_plugins() of its last heartbeat
    # The Redis broker's run id at its last heartbeat: another one means Redis restarted since
    # (workers/broker/watch.py), with the messages it held.
    broker_run_id = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["hostname"]

    def __str__(self) -> str:
        return self.hostname

    @property
    def is_lost(self) -> bool:
        return timezone.now() - self.last_heartbeat > timedelta(seconds=settings.WORKER_LOST_AFTER)

    @classmethod
    def live(cls):
        cutoff = timezone.now() - timedelta(seconds=settings.WORKER_LOST_AFTER)
        return cls.objects.filter(last_heartbeat__gte=cutoff)

    def serve_queues(self) -> list[str]:
        return [q for q in self.queue.split(",") if q]


def queue_name(kind: str) -> str:
    """The name of the ``cpu`` or ``gpu`` queue. FEDWEB_QUEUES may rename them: the first is the
    CPU one, the second the GPU one (the CPU one when only one is named)."""
    queues = settings.FEDWEB_QUEUES
    if kind == "cpu":
        return queues[0]
    return queues[1] if len(queues) > 1 else queues[0]


def pick_queue(spec: Spec) -> str:
    """The queue for a spec's device: ``cpu`` -> cpu; ``cuda*`` -> gpu; ``auto`` -> gpu when a
    live worker serves the gpu queue, else cpu (so a CPU-only install still runs everything)."""
    cpu, gpu = queue_name("cpu"), queue_name("gpu")
    device = spec.compute.device
    if device == "cpu":
        return cpu
    if device.startswith("cuda"):
        return gpu
    has_gpu_worker = any(gpu in w.serve_queues() for w in Worker.live())
    return gpu if has_gpu_worker else cpu
