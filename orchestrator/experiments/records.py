"""What a run leaves behind: its rounds' metrics, its checkpoints and its log.

Each row belongs to one experiment (``orchestrator.models.Experiment``) and is written by the
round task or the state machine; the pages and the API only read them.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from workers.engine.result import ROUND_RESULT_FIELDS


class RoundMetric(models.Model):
    """One RoundResult, as the engine returned it. Field names match ROUND_RESULT_FIELDS exactly
    (tests/orchestrator/test_round_fields.py fails when they drift)."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="rounds")
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
    client_accuracy_p10 = models.FloatField(null=True)
    client_accuracy_p25 = models.FloatField(null=True)
    client_accuracy_p50 = models.FloatField(null=True)
    client_accuracy_p75 = models.FloatField(null=True)
    client_accuracy_p90 = models.FloatField(null=True)
    client_accuracy_mean = models.FloatField(null=True)
    client_accuracy_worst10 = models.FloatField(null=True)
    train_loss_p10 = models.FloatField(null=True)
    train_loss_p25 = models.FloatField(null=True)
    train_loss_p50 = models.FloatField(null=True)
    train_loss_p75 = models.FloatField(null=True)
    train_loss_p90 = models.FloatField(null=True)
    participation_histogram = models.JSONField(null=True)
    dp_clip_norm = models.FloatField(null=True)
    dp_clipped_fraction = models.FloatField(null=True)
    dp_epsilon = models.FloatField(null=True)
    recorded = models.DateTimeField(default=timezone.now)
    # When the worker claimed the round (null for rounds recorded before this field, and sharded
    # ones): with ``recorded`` it spans the round's hold on a worker slot, so overlaps are facts.
    claimed = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True)  # the worker that ran it (plugin routing is checked on it)

    class Meta:
        ordering = ["experiment", "round"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round"], name="one_metric_per_round")]

    def to_result_dict(self) -> dict:
        return {name: getattr(self, name) for name in ROUND_RESULT_FIELDS}

    @classmethod
    def record(cls, experiment, result: dict, claimed=None) -> RoundMetric:
        """Store a round's result; a second delivery of the same round keeps the first row."""
        # .get: a result sent by a worker older than a newer (nullable) field still records.
        values = {name: result.get(name) for name in ROUND_RESULT_FIELDS if name != "round"}
        values["worker"] = experiment.worker  # the claimant: the round task records after claiming
        values["claimed"] = claimed
        metric, _ = cls.objects.get_or_create(experiment=experiment, round=result["round"], defaults=values)
        return metric


class Checkpoint(models.Model):
    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="checkpoints")
    round = models.PositiveIntegerField()
    path = models.CharField(max_length=1000)
    size_bytes = models.BigIntegerField()
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["experiment", "round"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round"], name="one_checkpoint_per_round")]


def checkpoint_folder(experiment_id: int) -> Path:
    """Where an experiment's checkpoint files live (shared by the web process and the workers)."""
    return settings.FEDWEB_DATA_DIR / "checkpoints" / str(experiment_id)


class LogEntry(models.Model):
    """A line of an experiment's log, as shown in the dashboard."""

    LEVELS = [("info", "info"), ("warning", "warning"), ("error", "error")]

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="log_entries")
    time = models.DateTimeField(default=timezone.now, db_index=True)
    level = models.CharField(max_length=16, choices=LEVELS, default="info")
    message = models.TextField()

    class Meta:
        ordering = ["time", "id"]
        verbose_name_plural = "log entries"
