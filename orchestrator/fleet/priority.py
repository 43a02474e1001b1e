"""An experiment's scheduling priority: read by the ``priority`` policy (higher first, then FIFO),
changed by those who may control the experiment, from the dashboard or the API.

Only the ``priority`` column changes: what is already sent stays sent; the new value counts from
the queue's next scheduling decision.
"""

from __future__ import annotations

from orchestrator.experiments.models import Experiment

MIN_PRIORITY, MAX_PRIORITY = -1000, 1000


class PriorityError(ValueError):
    """A priority we refuse; the message names the field."""


def set_priority(experiment: Experiment, value: int | None, *, by: str = "") -> None:
    """Store ``value`` as the experiment's priority and say so in its log; ``PriorityError`` for
    anything but a whole number in [MIN_PRIORITY, MAX_PRIORITY] (None: the input was not one)."""
    if value is None or not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise PriorityError(f"priority must be a whole number between {MIN_PRIORITY} and {MAX_PRIORITY}")
    Experiment.objects.filter(pk=experiment.pk).update(priority=value)
    experiment.priority = value
    experiment.log("info", f"Priority set to {value}" + (f" by {by}" if by else ""))
