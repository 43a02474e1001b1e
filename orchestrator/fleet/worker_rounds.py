"""Where rounds ran, for the Workers page: per worker, the rounds it recorded recently and its
switches (rounds whose previous round ran on another worker, so it loaded the run's state first).

Read from the RoundMetric rows (the database is the source of truth, not the heartbeats), in a
bounded number of rows, and only for the experiments the viewer may read.
"""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from orchestrator.experiments.access import visible_ids
from orchestrator.experiments.records import RoundMetric

RECENT_MINUTES = 60
RECENT_LIMIT = 500  # rows read at most: the page costs the same whatever the fleet's history
SWITCHES_SHOWN = 5  # the newest switches listed per worker (all are counted)


def recent_rounds(user, *, minutes: int = RECENT_MINUTES, limit: int = RECENT_LIMIT) -> list[dict]:
    """Per worker (by host name), the rounds of experiments ``user`` may read that it recorded in
    the last ``minutes``: how many, per experiment, and its switches, newest first."""
    since = timezone.now() - timedelta(minutes=minutes)
    fields = ("experiment_id", "experiment__name", "round", "worker", "recorded")
    rows = list(RoundMetric.objects.filter(recorded__gte=since).order_by("-recorded", "-id").values(*fields)[:limit])
    visible = visible_ids(user, {r["experiment_id"] for r in rows})
    rows = [r for r in rows if r["experiment_id"] in visible and r["worker"]]
    ran_on = _previous_workers(rows)
    by_worker: dict[str, dict] = {}
    for r in rows:  # newest first, so each list below is too
        empty = {"hostname": r["worker"], "rounds": 0, "switches": 0, "last_switches": [], "experiments": {}}
        w = by_worker.setdefault(r["worker"], empty)
        w["rounds"] += 1
        e = w["experiments"].setdefault(r["experiment_id"], _experiment_entry(r))
        e["rounds"] += 1
        e["first"], e["last"] = min(e["first"], r["round"]), max(e["last"], r["round"])
        previous = ran_on.get((r["experiment_id"], r["round"] - 1))
        if previous and previous != r["worker"]:
            w["switches"] += 1
            if len(w["last_switches"]) < SWITCHES_SHOWN:
                w["last_switches"].append({**_experiment_ref(r), "round": r["round"], "from": previous})
    return [{**w, "experiments": list(w["experiments"].values())} for _, w in sorted(by_worker.items())]


def _previous_workers(rows: list[dict]) -> dict[tuple[int, int], str]:
    """(experiment, round) -> worker for ``rows`` and for the round before each experiment's
    earliest one there, which may have been recorded before the window (one more small query)."""
    ran_on = {(r["experiment_id"], r["round"]): r["worker"] for r in rows}
    earliest: dict[int, int] = {}
    for r in rows:
        earliest[r["experiment_id"]] = min(r["round"], earliest.get(r["experiment_id"], r["round"]))
    before = Q()
    for experiment_id, first in earliest.items():
        if first > 1:
            before |= Q(experiment_id=experiment_id, round=first - 1)
    if before:
        for r in RoundMetric.objects.filter(before).values("experiment_id", "round", "worker"):
            ran_on[(r["experiment_id"], r["round"])] = r["worker"]
    return ran_on


def _experiment_ref(row: dict) -> dict:
    return {"id": row["experiment_id"], "name": row["experiment__name"]}


def _experiment_entry(row: dict) -> dict:
    return {**_experiment_ref(row), "rounds": 0, "first": row["round"], "last": row["round"]}
