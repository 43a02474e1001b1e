"""A run's summaries kept in the database as its rounds arrive, so that the runs table filters, sorts
and groups ten thousand runs by them without reading a round.

``RunSummary`` holds one row per run with rounds: a column per summary the round fields declare
(``summaries.METRICS``: final and best accuracy and loss, rounds, time, bytes, final ε) and, for an
external run, the last, lowest and highest value of each custom metric. ``TargetStep`` holds the
rounds where the run's best test accuracy rose, each with what the run had spent by then (rounds,
seconds, bytes, ε): the first round at or above any target accuracy is the step with the smallest
accuracy at or above it, one index seek per run ("rounds to target", "MB to target"...).

Each recorded round is folded in with ``summaries.fold_one``, the rule ``summarize`` applies to a
whole run, so the row always equals ``summarize`` of the run's rounds; a round that arrives before
one already folded (never in the normal flow) has the run's row rebuilt from all its rounds.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models, transaction

from fedweb_engine.results import round_fields
from orchestrator.experiments.summaries import METRICS, fold_one, round_value

# The target's summary: its field's running maximum rises exactly at the steps.
TARGET = next(m for m in METRICS if m.key == "best_accuracy")
# What a step records of the run so far: the running values of these summaries.
COSTS = ("seconds", "bytes", "epsilon")
BY_KEY = {m.key: m for m in METRICS}
CUSTOM_LAST, CUSTOM_MIN, CUSTOM_MAX = range(3)  # RunSummary.custom: {name: [last, min, max]}


def _column(key: str, indexed: bool = True) -> models.Field:
    """A summary's column: an integer for counts and for folds of integer fields (bytes), else a float;
    indexed in the summary row, which the runs table sorts by."""
    metric = BY_KEY[key]
    if metric.aggregate == "count":
        return models.IntegerField(null=True, db_index=indexed)
    if all(round_fields.BY_NAME[k].type is int for k in metric.keys):
        return models.BigIntegerField(null=True, db_index=indexed)
    return models.FloatField(null=True, db_index=indexed)


SummaryColumns = type(
    "SummaryColumns",
    (models.Model,),
    {"__module__": __name__, "Meta": type("Meta", (), {"abstract": True}), **{m.key: _column(m.key) for m in METRICS}},
)


class RunSummary(SummaryColumns):
    """``summarize`` of one run's rounds, maintained as each round is recorded."""

    experiment = models.OneToOneField(
        "orchestrator.Experiment", models.CASCADE, primary_key=True, related_name="summary"
    )
    last_round = models.PositiveIntegerField(default=0)  # the latest round folded in
    custom = models.JSONField(default=dict, blank=True)  # an external run's metrics: {name: [last, min, max]}

    def state(self) -> dict:
        return {"last_round": self.last_round, "custom": self.custom, **{m.key: getattr(self, m.key) for m in METRICS}}


class TargetStep(models.Model):
    """A round where the run's best test accuracy rose, and what the run had spent by then."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="target_steps")
    round = models.PositiveIntegerField()
    value = models.FloatField()  # the new best
    seconds = _column("seconds", indexed=False)
    bytes = _column("bytes", indexed=False)
    epsilon = _column("epsilon", indexed=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experiment", "round"], name="one_target_step_per_round")]
        indexes = [models.Index(fields=["experiment", "value"], name="target_step_by_value")]


def empty_state() -> dict:
    return {"last_round": 0, "custom": {}, **{m.key: None for m in METRICS}}


def fold_round(state: dict, result: dict) -> dict | None:
    """Fold one round (a RoundResult dict, with an external run's ``custom`` scalars) into ``state``;
    the step it makes when it raises the best test accuracy, else None."""
    best_before = state[TARGET.key]
    for m in METRICS:
        state[m.key] = fold_one(m.aggregate, state[m.key], round_value(m, result))
    state["last_round"] = result["round"]
    for name, value in (result.get("custom") or {}).items():
        last_min_max = state["custom"].get(name)
        if value is None:
            continue
        state["custom"][name] = [value, value, value] if last_min_max is None else [
            value, min(value, last_min_max[CUSTOM_MIN]), max(value, last_min_max[CUSTOM_MAX])
        ]  # fmt: skip
    best = state[TARGET.key]
    if best is None or (best_before is not None and best <= best_before):
        return None
    return {"round": result["round"], "value": best, **{k: state[k] for k in COSTS}}


def fold_all(results: Iterable[dict]) -> tuple[dict, list[dict]]:
    """The state and steps of a whole run from its rounds, oldest first."""
    state, steps = empty_state(), []
    for result in results:
        if (step := fold_round(state, result)) is not None:
            steps.append(step)
    return state, steps


def at_target(steps: list[dict], target: float) -> dict | None:
    """The step of the first round at or above ``target`` (None when the run never reached it)."""
    return next((s for s in steps if s["value"] >= target), None)


def note_rounds(experiment_id: int, results: list[dict]) -> bool:
    """Fold newly recorded rounds into the run's row. False, changing nothing, when one of them is
    not after the rounds already folded in: the caller then rebuilds the row (``rebuild``)."""
    ordered = sorted(results, key=lambda r: r["round"])
    with transaction.atomic():
        row = RunSummary.objects.select_for_update().filter(pk=experiment_id).first()
        state = row.state() if row else empty_state()
        if ordered and ordered[0]["round"] <= state["last_round"]:
            return False
        steps = [s for r in ordered if (s := fold_round(state, r)) is not None]
        _save(experiment_id, state, steps, exists=row is not None)
    return True


def rebuild(experiment_id: int, results: Iterable[dict]) -> None:
    """The run's row and steps from all its rounds (oldest first), replacing what was there."""
    state, steps = fold_all(results)
    with transaction.atomic():
        TargetStep.objects.filter(experiment_id=experiment_id).delete()
        exists = RunSummary.objects.filter(pk=experiment_id).exists()
        _save(experiment_id, state, steps, exists=exists)


def _save(experiment_id: int, state: dict, steps: list[dict], *, exists: bool) -> None:
    values = {k: state[k] for k in ("last_round", "custom", *BY_KEY)}
    if exists:
        RunSummary.objects.filter(pk=experiment_id).update(**values)
    else:
        RunSummary.objects.create(experiment_id=experiment_id, **values)
    TargetStep.objects.bulk_create([TargetStep(experiment_id=experiment_id, **s) for s in steps])
