"""A run in a few numbers: final and best test accuracy, final and best loss, rounds, time, bytes and, for
a differentially private run, the privacy spent so far (the final ε).

The runs table and the compare page show them as table columns (the runs table from the row the
database keeps per run, ``run_summary``, folded round by round by ``fold_one``); the dashboard and
the report show them as a summary block (from the rounds they already read).
"""

from __future__ import annotations

from typing import NamedTuple

from fedweb_engine.results import round_fields


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
# (fedweb_engine/results/round_fields.py, ``Summary``); the page's script lets the reader hide any of them
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


def fold_one(aggregate: str, current, value):
    """``fold`` with one more value, the next round's (None: the round has none): what the maintained
    summary of a run (``run_summary``) does per recorded round, so that folding a run's rounds one by
    one, oldest first, gives ``fold`` of them all."""
    if value is None:
        return current
    if current is None:
        return 1 if aggregate == "count" else value
    if aggregate == "count":
        return current + 1
    if aggregate == "sum":
        return current + value
    if aggregate == "min":
        return min(current, value)
    return value if aggregate == "last" else max(current, value)


def round_value(metric: Metric, result: dict):
    """The value ``metric`` folds in from one round (None when the round lacks one of its keys)."""
    return _value(metric, result)


def summarize(rounds: list[dict]) -> dict:
    """The summary of a run from its rounds (``RoundResult`` dicts, oldest first)."""
    if not rounds:
        return dict(EMPTY)
    return {m.key: fold(m.aggregate, [v for r in rounds if (v := _value(m, r)) is not None]) for m in METRICS}


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
