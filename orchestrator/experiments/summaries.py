"""A run in a few numbers: final and best test accuracy, final loss, rounds, time, bytes and, for
a differentially private run, the privacy spent so far (the final ε).

The experiments list and the compare page show them as table columns (computed in the database,
a bounded number of queries for the whole list); the dashboard and the report show them as a
summary block (from the rounds they already read).
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Count, F, Max, OuterRef, Subquery, Sum

from orchestrator.experiments.records import RoundMetric


class Metric(NamedTuple):
    """A summary column: its key, its heading, and how many decimals it shows (scale divides first)."""

    key: str
    label: str  # the table heading
    title: str  # the summary block's
    digits: int
    scale: float = 1.0
    unit: str = ""


# The metric columns of the list and compare tables, in order; the page's script lets the reader
# hide any of them (remembered per browser).
METRICS = (
    Metric("final_accuracy", "Final acc.", "Final test accuracy", 4),
    Metric("best_accuracy", "Best acc.", "Best test accuracy", 4),
    Metric("final_loss", "Final loss", "Final test loss", 4),
    Metric("rounds", "Rounds", "Rounds done", 0),
    Metric("seconds", "Time", "Time (Σ round seconds)", 1, unit=" s"),
    Metric("bytes", "Total MB", "MB communicated (up + down)", 2, scale=1e6),
    # ε only grows, so the last recorded value is the privacy spent by the whole run ("–" without DP).
    Metric("epsilon", "Final ε", "Privacy spent (final ε)", 3),
)
EMPTY = {m.key: None for m in METRICS}


def summarize(rounds: list[dict]) -> dict:
    """The summary of a run from its rounds (``RoundResult`` dicts, oldest first)."""
    accuracies = [r["test_accuracy"] for r in rounds if r["test_accuracy"] is not None]
    losses = [r["test_loss"] for r in rounds if r["test_loss"] is not None]
    epsilons = [r["dp_epsilon"] for r in rounds if r.get("dp_epsilon") is not None]
    if not rounds:
        return dict(EMPTY)
    return {
        "final_accuracy": accuracies[-1] if accuracies else None,
        "best_accuracy": max(accuracies) if accuracies else None,
        "final_loss": losses[-1] if losses else None,
        "rounds": len(rounds),
        "seconds": sum(r["round_seconds"] or 0.0 for r in rounds),
        "bytes": sum(r["bytes_up"] + r["bytes_down"] for r in rounds),
        "epsilon": epsilons[-1] if epsilons else None,
    }


def summaries_for(experiment_ids: list[int]) -> dict[int, dict]:
    """``summarize`` of every experiment in ``experiment_ids`` with rounds, from two queries."""
    rounds = RoundMetric.objects.filter(experiment_id__in=experiment_ids)
    totals = rounds.values("experiment_id").annotate(
        n=Count("id"),
        best=Max("test_accuracy"),
        seconds=Sum("round_seconds"),
        bytes=Sum(F("bytes_up") + F("bytes_down")),
    )
    out = {
        t["experiment_id"]: {**EMPTY, "best_accuracy": t["best"], "rounds": t["n"], "seconds": t["seconds"]}
        | {"bytes": t["bytes"]}
        for t in totals
    }
    evaluated = RoundMetric.objects.filter(experiment_id=OuterRef("experiment_id"), test_accuracy__isnull=False)
    last = evaluated.order_by("-round")
    finals = (
        rounds.filter(test_accuracy__isnull=False)
        .values("experiment_id")
        .distinct()
        .annotate(acc=Subquery(last.values("test_accuracy")[:1]), loss=Subquery(last.values("test_loss")[:1]))
    )
    for row in finals:
        out[row["experiment_id"]].update(final_accuracy=row["acc"], final_loss=row["loss"])
    private = RoundMetric.objects.filter(experiment_id=OuterRef("experiment_id"), dp_epsilon__isnull=False)
    spent = (
        rounds.filter(dp_epsilon__isnull=False)
        .values("experiment_id")
        .distinct()
        .annotate(eps=Subquery(private.order_by("-round").values("dp_epsilon")[:1]))
    )
    for row in spent:
        out[row["experiment_id"]]["epsilon"] = row["eps"]
    return out


def cells(summary: dict) -> list[dict]:
    """The metric cells of one table row: the raw value (sorting) and the text shown."""
    row = []
    for m in METRICS:
        value = summary.get(m.key)
        text = "–" if value is None else f"{value / m.scale:.{m.digits}f}{m.unit}"
        row.append({"key": m.key, "title": m.title, "value": "" if value is None else value, "text": text})
    return row
