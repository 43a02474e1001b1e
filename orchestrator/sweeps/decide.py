"""A search's decisions, made by Optuna's own pruners and sampler on a study rebuilt from FedWeb's
rows at each decision (an in-memory study: Optuna's storage is never the source of truth, and there
is no second database to run). Pure: plain records in, a decision out.

- **ASHA** (``SuccessiveHalvingPruner``, ``bootstrap_count = eta - 1``): rungs at r, r·η, r·η², ...
  rounds (below the runs' length). A configuration reaching rung k continues only if it ranks in the
  top ⌊n/η⌋ of the n configurations that have reached rung k so far (ties at the cut-off continue);
  before η have reached it, none does. A stopped configuration is asked again whenever another
  reaches its rung (``promotable``): it is promoted once it ranks in (asynchronous successive
  halving, Li et al. 2020, whose promotions Optuna cannot make since it cannot resume a trial).
- **Median** (``MedianPruner``, Optuna's defaults otherwise): from round r on, every r rounds, a
  configuration stops if its best value so far is worse than the median of the completed
  configurations' values at that round; nothing stops before 5 configurations have completed.
- **TPE** (``TPESampler``): the next configuration from the finished ones (stopped ones count as
  pruned trials, running ones as Optuna's "constant liar" assumes).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

optuna.logging.set_verbosity(optuna.logging.WARNING)  # no line per rebuilt trial in the workers' logs
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)

MEDIAN_STARTUP = 5  # MedianPruner's default n_startup_trials
STATES = {
    "running": TrialState.RUNNING,
    "stopped": TrialState.PRUNED,
    "completed": TrialState.COMPLETE,
    "failed": TrialState.FAIL,
}


@dataclass(frozen=True)
class Record:
    """A trial as the decisions see it: its values at the decision rounds it reached."""

    number: int
    state: str  # a ``TrialState`` value of orchestrator.sweeps.models
    values: dict[int, float | None]  # decision round -> value (None: no value, counted as NaN)
    value: float | None = None  # at the full length, once completed
    params: dict = field(default_factory=dict)  # TPE only


@dataclass(frozen=True)
class Rule:
    """What a decision needs of the sweep's settings."""

    stopping: str  # "asha" or "median" (or "none": no decision rounds)
    first_rung: int
    eta: int
    direction: str
    total: int  # the runs' length: decisions happen strictly before it


def decision_rounds(rule: Rule) -> list[int]:
    """The rounds at which a configuration is judged: ASHA's rungs, or median's every r rounds."""
    if rule.stopping == "asha":
        rounds, r = [], rule.first_rung
        while r < rule.total:
            rounds.append(r)
            r *= rule.eta
        return rounds
    if rule.stopping == "median":
        return list(range(rule.first_rung, rule.total, rule.first_rung))
    return []


def should_stop(rule: Rule, records: list[Record], judged: Record, step: int) -> bool:
    """Optuna's pruner on ``judged`` at decision round ``step`` (its value there in ``judged.values``),
    among ``records`` (the other trials, whatever their state)."""
    rungs = decision_rounds(rule)
    study = _study(rule.direction)
    for record in records:
        if record.number != judged.number:
            study.add_trial(_frozen(record, rungs, rule.direction, before=None))
    upto = {s: v for s, v in judged.values.items() if s <= step}
    study.add_trial(_frozen(Record(judged.number, "running", upto), rungs, rule.direction, before=step))
    trial = study.get_trials(deepcopy=False)[-1]
    return _pruner(rule).prune(study, trial)


def promotable(rule: Rule, records: list[Record], stopped: Record, step: int) -> bool:
    """May a configuration stopped at rung ``step`` continue now that more have reached it? (ASHA)"""
    return rule.stopping == "asha" and not should_stop(rule, records, stopped, step)


def rank(records: list[Record], number: int, step: int, direction: str) -> tuple[int, int]:
    """(rank, of): where trial ``number`` stands among the trials with a value at ``step``; equal
    values share the better rank, a missing value ranks last."""
    scored = {r.number: score(r.values.get(step), direction) for r in records if step in r.values}
    mine = scored[number]
    return 1 + sum(1 for s in scored.values() if s < mine), len(scored)


def score(value: float | None, direction: str) -> float:
    """A value to sort by, lower is better whatever the direction; no value is worst."""
    if value is None or math.isnan(value):
        return math.inf
    return -value if direction == "maximize" else value


def best(records: list[Record], direction: str) -> Record | None:
    """The completed trial with the best final value."""
    done = [r for r in records if r.value is not None]
    return min(done, key=lambda r: (score(r.value, direction), r.number)) if done else None


def distributions(ranges: dict[str, dict]) -> dict[str, BaseDistribution]:
    """Optuna's distribution of each checked range (``search_options.check_range``)."""
    made: dict[str, BaseDistribution] = {}
    for name, r in ranges.items():
        if r["type"] == "choice":
            made[name] = CategoricalDistribution(r["choices"])
        elif r["type"] == "int":
            made[name] = IntDistribution(r["low"], r["high"], log=r["log"])
        else:
            made[name] = FloatDistribution(r["low"], r["high"], log=r["log"])
    return made


def suggest(ranges: dict[str, dict], records: list[Record], *, direction: str, seed: int, budget: int) -> dict:
    """TPE's next configuration (its parameters) given every trial so far. Seeded by ``seed`` and the
    trial's number, so two configurations asked from the same history still differ."""
    dists = distributions(ranges)
    startup = min(10, max(1, budget // 2))  # Optuna's 10 random trials first, fewer for a small budget
    sampler = optuna.samplers.TPESampler(seed=seed + len(records), n_startup_trials=startup)
    study = _study(direction, sampler)
    for record in records:
        study.add_trial(_frozen(record, [], direction, before=None, dists=dists))
    return study.ask(dists).params


def _study(direction: str, sampler=None) -> optuna.Study:
    return optuna.create_study(storage=optuna.storages.InMemoryStorage(), direction=direction, sampler=sampler)


def _pruner(rule: Rule) -> optuna.pruners.BasePruner:
    if rule.stopping == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=rule.first_rung, reduction_factor=rule.eta, min_early_stopping_rate=0,
            bootstrap_count=rule.eta - 1,
        )  # fmt: skip
    return optuna.pruners.MedianPruner(
        n_startup_trials=MEDIAN_STARTUP, n_warmup_steps=rule.first_rung, interval_steps=rule.first_rung
    )


def _frozen(
    record: Record, rungs: list[int], direction: str, *, before: int | None, dists=None
) -> optuna.trial.FrozenTrial:
    """``record`` as an Optuna trial: its values as intermediate values, and SuccessiveHalvingPruner's
    ``completed_rung_<k>`` for each rung it reached (for the judged trial only those before ``before``:
    the pruner records the one it judges itself)."""
    values = {s: (math.nan if v is None else v) for s, v in record.values.items()}
    worst = -math.inf if direction == "maximize" else math.inf  # no value ranks last (NaN does not sort)
    attrs = {
        f"completed_rung_{k}": worst if math.isnan(values[s]) else values[s]
        for k, s in enumerate(rungs)
        if s in values and (before is None or s < before)
    }
    state = STATES.get(record.state, TrialState.RUNNING)
    if state == TrialState.COMPLETE and record.value is None:
        state = TrialState.RUNNING  # resumed by hand, not finished yet
    if record.state == "manual" and record.value is not None:
        state = TrialState.COMPLETE
    params = {k: v for k, v in record.params.items() if dists and k in dists}
    return optuna.trial.create_trial(
        state=state,
        value=record.value if state == TrialState.COMPLETE else None,
        params=params,
        distributions={k: dists[k] for k in params} if dists else None,
        intermediate_values=values,
        system_attrs=attrs,
    )
