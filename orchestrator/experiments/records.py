"""What a run leaves behind: its rounds' metrics, its checkpoints and its log.

Each row belongs to one experiment (``orchestrator.experiments.models.Experiment``) and is written by the
round task or the state machine; the pages and the API only read them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import models
from django.utils import timezone

from fedweb_engine.results.round_fields import FIELDS, Field
from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS
from orchestrator.external.models import CustomMetric
from orchestrator.runs import run_summary


def _column(field: Field) -> models.Field:
    """The database column of a declared round field.

    Every number but the round's may be null even where the engine always fills it: an external
    run reports what it measured, and a number it leaves out (bytes, memory...) is absent, so the
    charts draw no point and the summaries skip it, where a stored 0 would be a false measurement.
    """
    if field.name == "round":  # the row's key with its experiment
        return models.PositiveIntegerField()
    if field.type is float:
        return models.FloatField(null=True)
    if field.type is int:
        return (models.BigIntegerField if field.wide else models.IntegerField)(null=True)
    if field.type is str:
        return models.CharField(max_length=200, null=field.null)
    return models.JSONField(null=field.null)  # lists


# One column per declared field (fedweb_engine/results/round_fields.py): a new field there is a new column
# here, and ``makemigrations`` writes its migration.
RoundFields = type(
    "RoundFields",
    (models.Model,),
    {"__module__": __name__, "Meta": type("Meta", (), {"abstract": True}), **{f.name: _column(f) for f in FIELDS}},
)


class RoundMetric(RoundFields):
    """One RoundResult, as the engine returned it: the columns of ``RoundFields``, and the row's own."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="rounds")
    recorded = models.DateTimeField(default=timezone.now)
    # When the worker claimed the round (null for rounds recorded before this field, and for the
    # sharded rounds of old): with ``recorded`` it spans the round's hold on a worker slot.
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
        metric, created = cls.objects.get_or_create(experiment=experiment, round=result["round"], defaults=values)
        if created:  # a second delivery is folded in once, by the first
            cls.fold_in(experiment.pk, [result])
        return metric

    @classmethod
    def fold_in(cls, experiment_id: int, results: list[dict]) -> None:
        """Keep the run's summary row (``run_summary``) up to date with newly recorded rounds."""
        if not run_summary.note_rounds(experiment_id, results):
            cls.refold(experiment_id)

    @classmethod
    def refold(cls, experiment_id: int) -> None:
        """Rebuild the run's summary row from every round it has recorded."""
        custom = dict(CustomMetric.objects.filter(experiment_id=experiment_id).values_list("round", "values"))
        rows = cls.objects.filter(experiment_id=experiment_id).order_by("round")
        run_summary.rebuild(experiment_id, ({**r.to_result_dict(), "custom": custom.get(r.round)} for r in rows))


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


# Where round work writes its log lines, so that the code handling the engine imports no Channels:
# it calls ``log_line(level, message)``, which is an experiment's ``log`` (a LogEntry row plus a
# live ``log`` event), or a line on stdout for the headless ``run_experiment --inline`` command.
LogLine = Callable[[str, str], object]


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
