"""A run in a few numbers: final and best test accuracy, final and best loss, rounds, time, bytes and, for
a differentially private run, the privacy spent so far (the final ε).

The experiments list and the compare page show them as table columns (computed in the database,
a bounded number of queries for the whole list); the dashboard and the report show them as a
summary block (from the rounds they already read).
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Count, F, Max, Min, OuterRef, Q, Subquery, Sum

from orchestrator.experiments.records import RoundMetric
from workers.engine import round_fields


class Metric(NamedTuple):
    """A summary column: its key, its headings, how it folds the rounds' values (the sum of ``keys``
    per round, over the rounds that have them all) and how many decimals it shows (scale divides first)."""

    key: str
    label: str  # the table heading
    title: str  # the summary block's
    digits: int
    scale: float = 1.0
    unit: str = ""
    aggregate: str = "last"  # round_fields.AGGREGATES
    keys: tuple[str, ...] = ()


# The metric columns of the list and compare tables, in order, as the round fields declare them
# (workers/engine/round_fields.py, ``Summary``); the page's script lets the reader hide any of them
# (remembered per browser), and the dashboard's folds the live rounds in by the same data.
METRICS = tuple(
    Metric(s.key, s.label, s.title, s.digits, s.scale, s.unit, s.aggregate, round_fields.summary_keys(f, s))
    for f, s in round_fields.summaries()
)
EMPTY = {m.key: None for m in METRICS}


def _value(metric: Metric, result: dict):
    values = [result.get(k) for k in metric.keys]
    return None if any(v is None for v in values) else sum(values)


def fold(aggregate: str, values: list):
    """One summary from the non-null values of a run's rounds, oldest first."""
    if aggregate == "count":
        return len(values)
    if not values:  # e.g. an external run that reported no bytes: "–", not a total of 0
        return None
    if aggregate == "sum":
        return sum(values)
    if aggregate == "min":
        return min(values)
    return values[-1] if aggregate == "last" else max(values)


def summarize(rounds: list[dict]) -> dict:
    """The summary of a run from its rounds (``RoundResult`` dicts, oldest first)."""
    if not rounds:
        return dict(EMPTY)
    return {m.key: fold(m.aggregate, [v for r in rounds if (v := _value(m, r)) is not None]) for m in METRICS}


def _expression(metric: Metric):
    total = F(metric.keys[0])
    for key in metric.keys[1:]:
        total = total + F(key)
    return total


def _present(metric: Metric) -> dict:
    return {f"{k}__isnull": False for k in metric.keys}  # the rounds summarize folds in


def _in_database(metric: Metric):
    """``summarize``'s rule for ``metric`` as an aggregate of one experiment's rows."""
    if metric.aggregate == "count":
        return Count("id", filter=Q(**_present(metric)))
    if metric.aggregate == "sum":
        return Sum(_expression(metric), filter=Q(**_present(metric)))
    if metric.aggregate == "max":
        return Max(_expression(metric), filter=Q(**_present(metric)))
    if metric.aggregate == "min":
        return Min(_expression(metric), filter=Q(**_present(metric)))
    latest = RoundMetric.objects.filter(experiment_id=OuterRef("experiment_id"), **_present(metric)).order_by("-round")
    return Subquery(latest.annotate(v=_expression(metric)).values("v")[:1])


def summaries_for(experiment_ids: list[int]) -> dict[int, dict]:
    """``summarize`` of every experiment in ``experiment_ids`` with rounds, from one query."""
    rows = (
        RoundMetric.objects.filter(experiment_id__in=experiment_ids)
        .values("experiment_id")
        .annotate(**{f"m_{m.key}": _in_database(m) for m in METRICS})
    )
    # SQL sums no rows to NULL, as summarize's sum over no values is None.
    return {row["experiment_id"]: {m.key: row[f"m_{m.key}"] for m in METRICS} for row in rows}


def definitions() -> list[dict]:
    """``METRICS`` as JSON for the dashboard's script, which folds each live round in by them."""
    return [m._asdict() for m in METRICS]


def cells(summary: dict) -> list[dict]:
    """The metric cells of one table row: the raw value (sorting) and the text shown."""
    row = []
    for m in METRICS:
        value = summary.get(m.key)
        text = "–" if value is None else f"{value / m.scale:.{m.digits}f}{m.unit}"
        row.append({"key": m.key, "title": m.title, "value": "" if value is None else value, "text": text})
    return row
