"""The search benchmark's driver side (``benchmarks.search``; Django set up): each way a real sweep, its
rounds run by the round task's own function in the fifo order, then its figures read back."""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any

from django.db.models import F

from benchmarks.search import CLIENTS, LRS  # read here, so a test can shrink them
from orchestrator.experiments.models import ACTIVE, Experiment
from orchestrator.experiments.records import LogEntry, RoundMetric
from orchestrator.sweeps import values
from orchestrator.sweeps.create import create_sweep
from orchestrator.sweeps.stats import value_at
from workers.rounds import execute_round

FIELDS = ("local.lr", "algorithm.client.name")
TARGET, LAST_K = "test_accuracy", 3


def run_rounds(sweep) -> None:
    """Every ready round of the sweep, oldest queued first (fifo), until none is ready."""
    last = None
    while True:
        ready = Experiment.objects.filter(sweep=sweep, status__in=ACTIVE, current_round__lt=F("total_rounds"))
        e = ready.order_by("queued_at", "pk").first()
        if e is None:
            return
        if last == (e.pk, e.current_round):
            raise RuntimeError(f"round {e.current_round + 1} of run {e.pk} was refused twice: {e.status} {e.error}")
        last = (e.pk, e.current_round)
        execute_round(e.pk, e.current_round + 1, worker="bench@search", dispatch=False)


def _config(e: Experiment) -> tuple:
    return tuple(value_at(e.spec, f) for f in FIELDS)


def _accuracies(run_ids: list[int]) -> dict[int, dict[int, float]]:
    rows = RoundMetric.objects.filter(experiment_id__in=run_ids).values_list("experiment_id", "round", TARGET)
    out: dict[int, dict[int, float]] = {pk: {} for pk in run_ids}
    for pk, number, acc in rows:
        out[pk][number] = acc
    return out


def _figures(sweep, wall: float, cpu: float, rounds: int) -> dict[str, Any]:
    runs = list(sweep.experiments.order_by("pk"))
    configs: dict[tuple, list[Experiment]] = {}
    for e in runs:
        configs.setdefault(_config(e), []).append(e)
    acc = _accuracies([e.pk for e in runs])
    full = {c: rs for c, rs in configs.items() if all(e.status == "completed" for e in rs)}
    scored = {c: values.value_at([e.pk for e in rs], TARGET, rounds, LAST_K) for c, rs in full.items()}
    pick = max(scored, key=lambda c: scored[c]) if scored else None
    messages = list(LogEntry.objects.filter(experiment__sweep=sweep).values_list("message", flat=True))
    return {
        "rounds": RoundMetric.objects.filter(experiment__sweep=sweep).count(),
        "round_seconds": sum(RoundMetric.objects.filter(experiment__sweep=sweep).values_list("round_seconds", flat=True)),
        "wall_seconds": wall, "cpu_seconds": cpu, "configurations_in_full": len(full),
        "pick": dict(zip(FIELDS, pick, strict=True)) if pick else None,
        "pick_value": scored.get(pick),
        "final_accuracy": {_label(c): statistics.fmean(acc[e.pk][rounds] for e in rs) for c, rs in full.items()},
        "stopped_runs": sum(1 for e in runs if e.status == "paused"),
        "promotions": sum(1 for m in messages if m.startswith("Promoted by the search")),
        "replayed": sum(1 for m in messages if "replaying" in m),
        "_runs": {(_config(e), e.spec["seed"]): acc[e.pk] for e in runs},
    }  # fmt: skip


def _label(config: tuple) -> str:
    return " ".join(f"{f.rsplit('.', 1)[-1]}={v}" for f, v in zip(FIELDS, config, strict=True))


def compare(owner, dataset: str, base: dict, seeds: list[int], plan: dict) -> dict[str, Any]:
    """Each way of ``plan`` ({way: (stopping, search settings)}) as a sweep of ``base``, then its figures."""
    axes = {"local.lr": LRS, "algorithm.client.name": CLIENTS, "seed": seeds}
    ways: dict[str, dict] = {}
    for way, (stopping, search) in plan.items():
        sweep = create_sweep(owner=owner, name=f"{dataset} {way}", base=base, axes=axes, stopping=stopping,
                             search=search, start=False)  # fmt: skip
        for e in sweep.experiments.order_by("pk"):
            e.start(enqueue=False)  # the inline queue: this process runs its rounds, no broker
        t0, c0 = time.perf_counter(), time.process_time()
        run_rounds(sweep)
        ways[way] = _figures(sweep, time.perf_counter() - t0, time.process_time() - c0, base["rounds"])
        print(f"search: {dataset} {way}: {ways[way]['rounds']} rounds in {ways[way]['wall_seconds']:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    grid = ways["grid"]
    best_label = max(grid["final_accuracy"], key=grid["final_accuracy"].get)
    reference = grid["final_accuracy"][best_label]
    for w in ways.values():
        picked = _label(tuple(w["pick"][f] for f in FIELDS)) if w["pick"] else None
        w["pick_label"] = picked
        w["pick_final_accuracy"] = w["final_accuracy"].get(picked) if picked else None
        w["gap_points"] = 100 * (reference - w["pick_final_accuracy"]) if picked else None
        w["rounds_ratio"] = w["rounds"] / grid["rounds"]
        w["max_round_difference"] = max(
            (abs(acc - grid["_runs"][key][n]) for key, rounds in w["_runs"].items() for n, acc in rounds.items()),
            default=0.0,
        )
    for w in ways.values():
        del w["_runs"]
    return {"reference": {"configuration": best_label, "final_accuracy": reference}, "ways": ways,
            "grid_final_accuracy": grid["final_accuracy"]}  # fmt: skip
