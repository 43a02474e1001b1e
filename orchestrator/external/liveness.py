"""Crash detection for external runs, on read: no daemon. A running external run whose last report
is older than FEDWEB_EXTERNAL_CRASH_AFTER seconds becomes crashed (one conditional UPDATE, so
racing readers agree); a later report makes it running again (``ingest.record``)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.live import events


def mark_crashed(now=None) -> list[int]:
    """Mark the silent running external runs crashed; returns their ids."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.FEDWEB_EXTERNAL_CRASH_AFTER)
    stale = Experiment.objects.filter(kind=Kind.EXTERNAL, status=Status.RUNNING, external__last_report__lt=cutoff)
    ids = list(stale.values_list("pk", flat=True)[:500])
    crashed = []
    for pk in ids:
        message = f"No report for {settings.FEDWEB_EXTERNAL_CRASH_AFTER} s: the run is shown as crashed"
        if Experiment.objects.filter(pk=pk, status=Status.RUNNING, external__last_report__lt=cutoff).update(
            status=Status.CRASHED, error=message
        ):
            experiment = Experiment.objects.get(pk=pk)
            experiment.log("warning", message)
            events.publish_status(experiment)
            crashed.append(pk)
    return crashed
