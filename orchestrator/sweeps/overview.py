"""What a sweep's page and API show of its search: each configuration's state and values at the
decision rounds, the current best with its interval over seeds, and the compute used against what
the full grid (every configuration, every seed, every round) would have used. From the database."""

from __future__ import annotations

import json
from collections import defaultdict

from django.db.models import Count, Q, Sum

from orchestrator.models import RoundMetric, Status, Sweep
from orchestrator.sweeps import decide, search, values
from orchestrator.sweeps.models import TrialState


def label(params: dict) -> str:
    return " ".join(f"{f.rsplit('.', 1)[-1]}={json.dumps(v)}" for f, v in params.items()) or "all runs"


def state_text(trial, rule: decide.Rule, runs: list, records: list[decide.Record]) -> str:
    """``stopped at rung 2 (rank 5 of 8)``, ``waits at a rung for its other seeds``... The rank is
    its standing now among every configuration that reached that rung (more arrive after a stop)."""
    rung = search.rung_number(rule, trial.rung) if trial.rung in decide.decision_rounds(rule) else None
    rank, of = decide.rank(records, trial.number, trial.rung, rule.direction) if rung else (None, None)
    if trial.state == TrialState.STOPPED and rung:
        return f"stopped at rung {rung} (rank {rank} of {of})"
    if trial.state == TrialState.RUNNING:
        reached = [s for s in trial.values if int(s) > (trial.rung or 0)]
        if reached and rule.stopping == "asha":
            return f"waits at rung {search.rung_number(rule, int(reached[0]))} for the configurations still below it"
        if any(r.status == Status.PAUSED for r in runs):
            return "waits at a rung for its other seeds"
        return f"running (rung {rung}: rank {rank} of {of})" if rung else "running"
    if trial.state == TrialState.MANUAL:
        return "resumed by hand: runs to its full length outside the search"
    if trial.state == TrialState.FAILED:
        return f"failed{': ' + trial.error if trial.error else ''}"
    return "completed"


def trials(sweep: Sweep) -> list[dict]:
    """One dict per configuration of a search, in creation order."""
    runs_of = defaultdict(list)
    for run in sweep.experiments.exclude(trial=None).order_by("pk"):
        runs_of[run.trial_id].append(run)
    options = search.options_of(sweep)
    records = search.records(sweep)
    rows = []
    for t in sweep.trials.order_by("number"):
        runs = runs_of[t.pk]
        rule = search.rule_of(sweep, max((r.total_rounds for r in runs), default=1))
        rows.append({
            "number": t.number, "params": t.params, "label": label(t.params), "state": t.state,
            "text": state_text(t, rule, runs, records), "values": {int(s): v for s, v in t.values.items()}, "value": t.value,
            "runs": [{"id": r.pk, "status": r.status, "current_round": r.current_round} for r in runs],
            "total": rule.total, "target": options.target,
        })  # fmt: skip
    return rows


def best(sweep: Sweep, rows: list[dict]) -> dict | None:
    """The best configuration: of those trained in full when there are some, else the best at the
    highest decision round reached (``at``). ``seeds``: its runs' own values there (the interval)."""
    options = search.options_of(sweep)
    direction = options.direction
    done = [r for r in rows if r["value"] is not None]
    if done:
        chosen = min(done, key=lambda r: (decide.score(r["value"], direction), r["number"]))
        at, value = chosen["total"], chosen["value"]
    else:
        reached = [r for r in rows if r["values"]]
        if not reached:
            return None
        at = max(max(r["values"]) for r in reached)
        candidates = [r for r in reached if at in r["values"]]
        chosen = min(candidates, key=lambda r: (decide.score(r["values"][at], direction), r["number"]))
        value = chosen["values"][at]
    ids = [r["id"] for r in chosen["runs"] if r["status"] not in search.GONE]
    seeds = [v for v in values.per_seed(ids, options.target, at, options.last_k).values() if v is not None]
    return {
        "number": chosen["number"], "label": chosen["label"], "params": chosen["params"], "value": value,
        "at": at, "full": bool(done), "seeds": seeds, "low": min(seeds, default=None), "high": max(seeds, default=None),
        "target": options.target, "direction": direction,
    }  # fmt: skip


def compute(sweep: Sweep) -> dict:
    """Rounds trained and their seconds against the full grid's (estimated at the measured mean)."""
    used = RoundMetric.objects.filter(experiment__sweep=sweep).aggregate(
        rounds=Count("pk"), seconds=Sum("round_seconds"), gpu=Count("pk", filter=Q(device__startswith="cuda"))
    )
    runs = list(sweep.experiments.values_list("trial_id", "total_rounds"))
    seeds = len(search.seeds_of(sweep))
    per_run = max((total for _, total in runs), default=0)
    if sweep.mode == "tpe":
        configurations = search.options_of(sweep).budget or 0
    else:
        configurations = sweep.trials.count() or len(runs) // seeds
    full_rounds = configurations * seeds * per_run
    rounds, seconds = used["rounds"], used["seconds"] or 0.0
    full_seconds = full_rounds * seconds / rounds if rounds else None
    return {
        "rounds": rounds, "full_rounds": full_rounds, "rounds_ratio": rounds / full_rounds if full_rounds else None,
        "seconds": seconds, "full_seconds": full_seconds,
        "seconds_ratio": seconds / full_seconds if full_seconds else None,
        "device": "GPU" if used["gpu"] and used["gpu"] * 2 >= rounds else "CPU",
    }  # fmt: skip


def summary(sweep: Sweep) -> dict | None:
    """Everything the page and the API show of a search; None for a plain grid or sample."""
    if not sweep.is_search:
        return None
    rows = trials(sweep)
    return {"trials": rows, "best": best(sweep, rows), "compute": compute(sweep), "options": sweep.search}
