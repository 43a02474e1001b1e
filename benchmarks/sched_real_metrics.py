"""``scheduling --real``'s figures, read back from the fleet's database and its runs' logs: the same
columns as the simulation (``sched_sim.summarise``).

- Completion = ``finished - queued_at``; makespan from the first submission to the last finish;
  utilisation = recorded round seconds / (workers x makespan) (task and dispatch overheads count as idle).
- Jain per user and per share key (team, or user without one) over the whole run: at every
  ``STEP_S`` between the first submission and the last finish, Jain's index of the rounds in flight
  (a recorded round ran ``round_seconds`` up to its ``recorded`` time) among everyone with an
  experiment submitted and unfinished; averaged over those instants.
- Switches and their seconds from the workers' info lines (``workers.runtime``: "Round N on W: loaded
  the state of round M in S s"); rebuilds and replayed rounds from the crash path's warnings
  ("... replaying rounds A..B ...").
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from benchmarks.sched_trace import jain

STEP_S = 0.05
SWITCH = re.compile(r"loaded the state of round \d+ in ([\d.]+) s")
REPLAY = re.compile(r"replaying rounds (\d+)\.\.(\d+)")


def read_back(ids: list[int], workers: int) -> dict[str, Any]:
    """In a driver (Django set up): the figures of the finished experiments ``ids``."""
    # Django is set up only in the driver process, after this module is imported.
    from orchestrator.experiments.models import Experiment
    from orchestrator.experiments.records import LogEntry, RoundMetric

    rows = list(Experiment.objects.filter(pk__in=ids))
    completion = np.array([(e.finished - e.queued_at).total_seconds() for e in rows])
    start = min(e.queued_at for e in rows).timestamp()
    end = max(e.finished for e in rows).timestamp()
    metrics = list(
        RoundMetric.objects.filter(experiment_id__in=ids).values_list("experiment_id", "recorded", "round_seconds")
    )
    round_seconds = [s for _, _, s in metrics]
    keys = {e.pk: (f"user:{e.owner_id}", f"team:{e.team_id}" if e.team_id else f"user:{e.owner_id}") for e in rows}
    present = {e.pk: (e.queued_at.timestamp(), e.finished.timestamp()) for e in rows}
    spans = [(pk, t.timestamp() - s, t.timestamp()) for pk, t, s in metrics]
    jain_user, jain_team = _jain_over_run(start, end, present, spans, keys)
    switches = rebuilds = replayed = 0
    switch_seconds = 0.0
    for message in LogEntry.objects.filter(experiment_id__in=ids).values_list("message", flat=True):
        if m := SWITCH.search(message):
            switches += 1
            switch_seconds += float(m.group(1))
        elif m := REPLAY.search(message):
            rebuilds += 1
            replayed += int(m.group(2)) - int(m.group(1)) + 1
    makespan = end - start
    return {
        "mean_completion_s": float(completion.mean()),
        "p95_completion_s": float(np.percentile(completion, 95)),
        "makespan_s": makespan,
        "utilisation": sum(round_seconds) / (workers * makespan),
        "jain_user": jain_user,
        "jain_team": jain_team,
        "jain": jain_team,
        "switches": switches,
        "rebuilds": rebuilds,
        "replayed_rounds": replayed,
        "switch_seconds": switch_seconds,
        "rounds_recorded": len(round_seconds),
        "mean_round_s": float(np.mean(round_seconds)),
        "statuses": sorted({e.status for e in rows}),
    }


def _jain_over_run(
    start: float,
    end: float,
    present: dict[int, tuple[float, float]],
    spans: list[tuple[int, float, float]],
    keys: dict[int, tuple[str, str]],
) -> tuple[float, float]:
    """Mean Jain's index (per user, per share key) of rounds in flight among those with work present."""
    totals, instants = [0.0, 0.0], 0
    for t in np.arange(start, end, STEP_S):
        here = [pk for pk, (a, b) in present.items() if a <= t < b]
        if not here:
            continue
        for level in (0, 1):
            alloc = dict.fromkeys((keys[pk][level] for pk in here), 0.0)
            for pk, a, b in spans:
                if a <= t < b:
                    alloc[keys[pk][level]] = alloc.get(keys[pk][level], 0.0) + 1.0
            totals[level] += jain(list(alloc.values()))
        instants += 1
    return (totals[0] / instants, totals[1] / instants) if instants else (1.0, 1.0)
