"""Experiments, their rounds, checkpoints and log, and the workers that run them.

The state machine of an experiment lives here. Every transition is one conditional UPDATE
(``filter(status__in=...).update(...)``) so that the web process and any number of workers can
race on the same row and exactly one of them wins.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from workers.engine.result import ROUND_RESULT_FIELDS
from workers.engine.spec import Spec, SpecError


class Status(models.TextChoices):
    DRAFT = "draft"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"


ACTIVE = (Status.QUEUED, Status.RUNNING)
FINISHED = (Status.CANCELLED, Status.COMPLETED, Status.FAILED)


def validate_spec(value) -> None:
    from django.core.exceptions import ValidationError

    try:
        Spec.from_dict(value)
    except SpecError as e:
        raise ValidationError(str(e), code=e.field) from None


class Experiment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="experiments")
    # Teams, visibility and share links arrive with the dashboard (issue 4); until then access is
    # owner-only and decided in can_view()/can_control() below, the one place to extend.
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    spec = models.JSONField(validators=[validate_spec])
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT, db_index=True)
    current_round = models.PositiveIntegerField(default=0)  # rounds completed and recorded
    total_rounds = models.PositiveIntegerField(default=0)
    queue = models.CharField(max_length=64, blank=True)
    priority = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=255, blank=True)  # hostname that ran the last round
    created = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    def save(self, *args, **kwargs):
        # The spec is normalised (defaults filled in) so what is stored is exactly what runs.
        spec = Spec.from_dict(self.spec)
        self.spec = spec.to_dict()
        self.total_rounds = spec.rounds
        super().save(*args, **kwargs)

    # -- domain ------------------------------------------------------------------------------

    def spec_obj(self) -> Spec:
        return Spec.from_dict(self.spec)

    def can_view(self, user) -> bool:
        return bool(user and user.is_authenticated and (user.id == self.owner_id or user.is_superuser))

    def can_control(self, user) -> bool:
        return bool(user and user.is_authenticated and user.id == self.owner_id)

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    def _transition(self, from_states, **changes) -> bool:
        """Apply ``changes`` only if the row is still in one of ``from_states``; refresh on success."""
        updated = Experiment.objects.filter(pk=self.pk, status__in=list(from_states)).update(**changes)
        if updated:
            self.refresh_from_db()
        return bool(updated)

    def start(self, *, by: str = "", enqueue: bool = True) -> bool:
        """Queue a draft. ``enqueue=False`` is for running it in this process (``--inline``)."""
        from orchestrator.scheduling import enqueue_next, pick_queue

        queue = pick_queue(self.spec_obj()) if enqueue else "inline"
        if not self._transition([Status.DRAFT], status=Status.QUEUED, queue=queue, queued_at=timezone.now()):
            return False
        self.log("info", f"Queued on '{queue}'" + (f" by {by}" if by else ""))
        self._status_changed()
        if enqueue:
            enqueue_next(self)
        return True

    def pause(self, *, by: str = "") -> bool:
        # A round already running finishes and is recorded; the next one is not enqueued.
        if not self._transition(ACTIVE, status=Status.PAUSED):
            return False
        self.log("info", "Paused" + (f" by {by}" if by else "") + "; takes effect at the end of the current round")
        self._status_changed()
        return True

    def resume(self, *, by: str = "") -> bool:
        from orchestrator.scheduling import enqueue_next

        if not self._transition([Status.PAUSED], status=Status.QUEUED, queued_at=timezone.now()):
            return False
        self.log("info", f"Resumed at round {self.current_round + 1}" + (f" by {by}" if by else ""))
        self._status_changed()
        enqueue_next(self)
        return True

    def cancel(self, *, by: str = "") -> bool:
        if not self._transition(
            [Status.DRAFT, *ACTIVE, Status.PAUSED], status=Status.CANCELLED, finished=timezone.now()
        ):
            return False
        self.log("info", "Cancelled" + (f" by {by}" if by else ""))
        self._status_changed()
        return True

    # -- used by the round task ----------------------------------------------------------------

    def claim(self, round_number: int, worker: str) -> bool:
        """May this worker run ``round_number`` now? False for duplicate, late or stopped deliveries."""
        return bool(
            Experiment.objects.filter(pk=self.pk, status__in=ACTIVE, current_round=round_number - 1).update(
                status=Status.RUNNING, worker=worker, started=Coalesce(F("started"), timezone.now())
            )
        )

    def advance(self, round_number: int) -> bool:
        """Record that ``round_number`` is done. Exactly one of two racing deliveries gets True.

        No status filter: a round that finished after a pause or cancel request still counts.
        """
        won = Experiment.objects.filter(pk=self.pk, current_round=round_number - 1).update(current_round=round_number)
        self.refresh_from_db()
        return bool(won)

    def complete(self) -> bool:
        done = self._transition([*ACTIVE, Status.PAUSED], status=Status.COMPLETED, finished=timezone.now())
        if done:
            self.log("info", f"Completed {self.current_round} rounds")
            self._status_changed()
        return done

    def fail(self, message: str) -> bool:
        failed = self._transition(
            [*ACTIVE, Status.PAUSED], status=Status.FAILED, error=message, finished=timezone.now()
        )
        if failed:
            self.log("error", message)
            self._status_changed()
        return failed

    def log(self, level: str, message: str) -> Event:
        from orchestrator import events

        event = Event.objects.create(experiment=self, level=level, message=message)
        events.publish_log(event)
        return event

    def _status_changed(self) -> None:
        from orchestrator import events

        events.publish_status(self)

    def latest_checkpoint(self, *, at_most: int | None = None) -> Checkpoint | None:
        qs = self.checkpoints.order_by("-round")
        if at_most is not None:
            qs = qs.filter(round__lte=at_most)
        return qs.first()


class RoundMetric(models.Model):
    """One RoundResult, as the engine returned it. Field names match ROUND_RESULT_FIELDS exactly."""

    experiment = models.ForeignKey(Experiment, models.CASCADE, related_name="rounds")
    round = models.PositiveIntegerField()
    participants = models.IntegerField()
    completed = models.IntegerField()
    stragglers = models.IntegerField()
    dropped = models.IntegerField()
    train_loss = models.FloatField(null=True)
    test_loss = models.FloatField(null=True)
    test_accuracy = models.FloatField(null=True)
    bytes_down = models.BigIntegerField()
    bytes_up = models.BigIntegerField()
    bytes_formula = models.BigIntegerField()
    round_seconds = models.FloatField()
    train_seconds = models.FloatField()
    samples = models.BigIntegerField()
    rss_mb = models.FloatField()
    threads = models.IntegerField()
    vram_allocated_mb = models.FloatField(null=True)
    vram_reserved_mb = models.FloatField(null=True)
    vram_peak_mb = models.FloatField(null=True)
    device = models.CharField(max_length=200)
    recorded = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["experiment", "round"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round"], name="one_metric_per_round")]

    def to_result_dict(self) -> dict:
        return {name: getattr(self, name) for name in ROUND_RESULT_FIELDS}

    @classmethod
    def record(cls, experiment: Experiment, result: dict) -> RoundMetric:
        """Store a round's result; a second delivery of the same round keeps the first row."""
        values = {name: result[name] for name in ROUND_RESULT_FIELDS if name != "round"}
        metric, _ = cls.objects.get_or_create(experiment=experiment, round=result["round"], defaults=values)
        return metric


class Checkpoint(models.Model):
    experiment = models.ForeignKey(Experiment, models.CASCADE, related_name="checkpoints")
    round = models.PositiveIntegerField()
    path = models.CharField(max_length=1000)
    size_bytes = models.BigIntegerField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["experiment", "round"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round"], name="one_checkpoint_per_round")]


class Event(models.Model):
    """A line of an experiment's log, as shown in the dashboard."""

    LEVELS = [("info", "info"), ("warning", "warning"), ("error", "error")]

    experiment = models.ForeignKey(Experiment, models.CASCADE, related_name="events")
    time = models.DateTimeField(default=timezone.now, db_index=True)
    level = models.CharField(max_length=16, choices=LEVELS, default="info")
    message = models.TextField()

    class Meta:
        ordering = ["time", "id"]


class Worker(models.Model):
    hostname = models.CharField(max_length=255, unique=True)
    queue = models.CharField(max_length=255)
    devices = models.JSONField(default=list, blank=True)  # [{"name", "total_mb", "used_mb"}]
    last_heartbeat = models.DateTimeField(default=timezone.now)
    current_experiment = models.ForeignKey(Experiment, models.SET_NULL, null=True, blank=True, related_name="+")

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
