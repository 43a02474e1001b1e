"""A configuration's value at a round, as every decision of a search reads it: never one round of one
seed. Per run, the mean of the target over its last ``last_k`` evaluated rounds up to that round
(rounds without the target, e.g. not evaluated, are skipped); then the mean over the runs (seeds)
that have one. A run that failed or was cancelled is left out: its configuration goes on with the
seeds it has left. Read from the runs' ``RoundMetric`` rows, or ``CustomMetric`` for ``custom:<name>``.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict

from orchestrator.models import CustomMetric, RoundMetric
from orchestrator.sweeps.search_options import CUSTOM_PREFIX

Points = list[tuple[int, float]]  # (round, value), oldest first


def smoothed(points: Points, step: int, last_k: int) -> float | None:
    """The mean of the last ``last_k`` values at rounds <= ``step``; None if there is none yet."""
    upto = [v for r, v in points if r <= step]
    return statistics.fmean(upto[-last_k:]) if upto else None


def combined(values: list[float | None]) -> float | None:
    """The mean over the seeds that have a value."""
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def series(run_ids: list[int], target: str) -> dict[int, Points]:
    """Every run's finite values of ``target`` by round, oldest first."""
    found: dict[int, Points] = defaultdict(list)
    if target.startswith(CUSTOM_PREFIX):
        name = target[len(CUSTOM_PREFIX) :]
        rows = CustomMetric.objects.filter(experiment_id__in=run_ids).order_by("round")
        for run_id, number, values in rows.values_list("experiment_id", "round", "values"):
            _add(found[run_id], number, values.get(name) if isinstance(values, dict) else None)
    else:
        rows = RoundMetric.objects.filter(experiment_id__in=run_ids).order_by("round")
        for run_id, number, value in rows.values_list("experiment_id", "round", target):
            _add(found[run_id], number, value)
    return {pk: found.get(pk, []) for pk in run_ids}


def _add(points: Points, number: int, value) -> None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        points.append((number, float(value)))


def per_seed(run_ids: list[int], target: str, step: int, last_k: int) -> dict[int, float | None]:
    """Each run's smoothed value at ``step``."""
    return {pk: smoothed(points, step, last_k) for pk, points in series(run_ids, target).items()}


def value_at(run_ids: list[int], target: str, step: int, last_k: int) -> float | None:
    """The configuration's value at ``step``: the mean over ``run_ids`` (its live seeds)."""
    return combined(list(per_seed(run_ids, target, step, last_k).values()))
