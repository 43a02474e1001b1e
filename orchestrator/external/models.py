"""The rows an external run adds beside its Experiment: its run-scoped token, and the user-named
scalars of each round (the standard fields go to the same RoundMetric row native rounds use)."""

from __future__ import annotations

import hashlib
import secrets

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
