"""The states of an experiment, its kinds and who may see it: the names the rest of the domain
(fleet, sweeps, records) shares with ``orchestrator.models`` without importing the models."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models


class Status(models.TextChoices):
    DRAFT = "draft"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"
    CRASHED = "crashed"  # an external run that sent no report for FEDWEB_EXTERNAL_CRASH_AFTER seconds


ACTIVE = (Status.QUEUED, Status.RUNNING)
FINISHED = (Status.CANCELLED, Status.COMPLETED, Status.FAILED, Status.CRASHED)


class Kind(models.TextChoices):
    NATIVE = "native"  # FedWeb's workers run its rounds
    EXTERNAL = "external"  # its rounds are reported over the API (orchestrator.external)


class Visibility(models.TextChoices):
    PRIVATE = "private"  # the owner (and superusers) only
    TEAM = "team"  # the team's members, by role
    PUBLIC = "public"  # the team's members, and anyone holding the read-only share link


def check_team_visibility(visibility: str, team) -> None:
    """Team visibility needs a team. The one check of it: the model's ``clean()`` (and so the
    sharing form), the new-experiment form and the API all call it; the error names ``visibility``."""
    if visibility == Visibility.TEAM and team is None:
        raise ValidationError({"visibility": "Choose a team to share the experiment with its team"})
