"""The rows an external run adds beside its Experiment: its run-scoped token, and the user-named
scalars of each round (the standard fields go to the same RoundMetric row native rounds use)."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "frt_"  # "FedWeb run token": tells it apart from a user's API token at a glance


def hash_token(token: str) -> str:
    """Only the hash is stored: a database dump leaks no usable run token."""
    return hashlib.sha256(token.encode()).hexdigest()


class ExternalRun(models.Model):
    """An external run's write credential and liveness: ``last_report`` feeds crash detection."""

    experiment = models.OneToOneField("orchestrator.Experiment", models.CASCADE, related_name="external")
    token_hash = models.CharField(max_length=64, unique=True)
    expires = models.DateTimeField(null=True, blank=True)
    revoked = models.BooleanField(default=False)
    last_report = models.DateTimeField(default=timezone.now)

    @classmethod
    def issue(cls, experiment, *, expires=None) -> tuple[ExternalRun, str]:
        """Create the run's token row; returns it and the token, which is shown only this once."""
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        row = cls.objects.create(experiment=experiment, token_hash=hash_token(token), expires=expires)
        return row, token

    def usable(self, now=None) -> bool:
        return not self.revoked and (self.expires is None or self.expires > (now or timezone.now()))


class CustomMetric(models.Model):
    """The user-named finite scalars of one round of a run: ``{"name": value}``."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="custom_metrics")
    round = models.PositiveIntegerField()
    values = models.JSONField(default=dict)

    class Meta:
        ordering = ["experiment", "round"]
        constraints = [models.UniqueConstraint(fields=["experiment", "round"], name="one_custom_metric_per_round")]


class MlflowExperiment(models.Model):
    """An MLflow experiment (``/api/2.0/mlflow/experiments/...``): a user's named folder of runs.
    Its runs are FedWeb external runs; names are unique per owner."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="mlflow_experiments")
    name = models.CharField(max_length=500)
    tags = models.JSONField(default=dict)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="one_mlflow_experiment_name_per_owner")]


class MlflowRun(models.Model):
    """What an external run holds for the MLflow API beside its rounds: its MLflow experiment, tags,
    the metric names the script logged, step-0 metrics (run-level, no round), and the round whose
    metrics are still arriving (``pending``: recorded as a round once a later step or the end comes)."""

    experiment = models.OneToOneField("orchestrator.Experiment", models.CASCADE, related_name="mlflow")
    mlflow_experiment = models.ForeignKey(MlflowExperiment, models.SET_NULL, null=True, related_name="runs")
    tags = models.JSONField(default=dict)
    keys = models.JSONField(default=list)  # metric names as the script logged them, in first-seen order
    run_metrics = models.JSONField(default=dict)  # step 0: {name: [value, timestamp_ms]}
    pending = models.JSONField(null=True, blank=True)  # {"round": r, "metrics": {name: [value, timestamp_ms]}}
