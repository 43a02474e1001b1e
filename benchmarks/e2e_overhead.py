"""What the web/worker path costs over the engine alone (issue 17): ``python -m benchmarks e2e_overhead``.

One spec (``SPEC``: digits 28x28, the CNN, rounds of about a second on one CPU thread here) runs three
ways, each timed from outside as a user would:

- ``cli``: ``python -m fedweb_engine run spec.json --quiet`` in a fresh process (one torch thread);
- ``worker``: ``manage.py run_experiment spec.json --wait`` against a running FedWeb with one real
  Celery worker (``benchmarks.fleet.LocalFleet``: its own SQLite database, the Redis at ``$REDIS_URL``);
- ``2w3e``: three ``run_experiment --wait`` at once against a FedWeb with two workers.

Wall seconds per round: the process's wall time over its rounds for ``cli`` and ``worker``; for
``2w3e``, the wall time until all three finish over the rounds each worker ran (3 x rounds / 2), i.e.
per round of one worker. The overhead of a way is its wall per round over the CLI's in the same
repeat, minus one (target <= 5%). The ways are interleaved in each repeat (>= 3), so a change in the
machine's load hits all of them; min, median and max are reported. The engine's own mean
``round_seconds`` is reported beside each, from its JSON lines (CLI) or the recorded rounds, and for the
worker ways the gap between rounds (from one round's record to the next one's start).

The workers are started once (worker start-up is not counted: a deployment keeps them running); the
CLI pays its interpreter and torch import in every run, as a user running it does.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Options
from benchmarks.fleet import ROOT, LocalFleet, start_driver

SPEC = {
    "seed": 1,
    "rounds": 10,
    "data": {"name": "digits", "options": {"image_size": 28}, "num_clients": 40},
    "model": {"name": "cnn"},
    "participation": {"clients_per_round": 4},
    "local": {"epochs": 1},
    "evaluation": {"every": 5},
    "compute": {"device": "cpu"},
}
REPEATS = {"small": 3, "full": 5}
WAYS = ("cli", "worker", "2w3e")


def _cli(spec_path: Path, env: dict[str, str]) -> tuple[float, list[float]]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "fedweb_engine", "run", str(spec_path), "--quiet"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    rounds = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return wall, [r["round_seconds"] for r in rounds]


def _run_experiments(fleet: LocalFleet, spec_path: Path, n: int) -> float:
    """``n`` run_experiment --wait processes at once against ``fleet``; the wall time until all end."""
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "manage.py", "run_experiment", str(spec_path), "--wait", "--user", "bench-e2e"],
            cwd=ROOT,
            env=fleet.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(n)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"run_experiment failed: {err[-2000:]}")
    return time.perf_counter() - t0


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def run(opts: Options) -> dict[str, Any]:
    """Interleaved repeats of the three ways; see the module docstring."""
    rounds = SPEC["rounds"]
    spec_path = Path(tempfile.mkdtemp(prefix="fedweb-e2e-")) / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    walls: dict[str, list[float]] = {w: [] for w in WAYS}
    engine: dict[str, list[float]] = {w: [] for w in WAYS}
    t_start = time.time()
    with LocalFleet(1) as one, LocalFleet(2) as two:
        for fleet in (one, two):
            fleet.drive("benchmarks.e2e_overhead", {}, timeout=300)  # every worker beating
        for repeat in range(REPEATS[opts.size]):
            print(f"e2e_overhead: repeat {repeat + 1}", file=sys.stderr, flush=True)
            wall, seconds = _cli(spec_path, one.env)
            walls["cli"].append(wall / rounds)
            engine["cli"].append(statistics.mean(seconds))
            walls["worker"].append(_run_experiments(one, spec_path, 1) / rounds)
            walls["2w3e"].append(_run_experiments(two, spec_path, 3) / (3 * rounds / 2))
        gaps = {}
        for way, fleet in (("worker", one), ("2w3e", two)):
            read = fleet.drive("benchmarks.e2e_overhead", {"read": True}, timeout=120)
            engine[way], gaps[way] = read["round_seconds"], _spread(read["gaps_s"])
    overhead = {w: _spread([walls[w][i] / walls["cli"][i] - 1 for i in range(len(walls["cli"]))]) for w in WAYS[1:]}
    rows = {w: {"wall_per_round_s": _spread(walls[w]), "engine_round_s": statistics.mean(engine[w])} for w in WAYS}
    table = format_table(rows, overhead)
    print(table, flush=True)
    return {
        "device": "CPU, one torch thread per process",
        "precision": opts.precision,
        "wall_seconds": time.time() - t_start,
        "spec": SPEC,
        "repeats": REPEATS[opts.size],
        "walls_per_round_s": walls,
        "ways": rows,
        "overhead_vs_cli": overhead,
        "gap_between_rounds_s": gaps,
        "table": table,
        "seconds_per_round": rows["worker"]["wall_per_round_s"]["median"],
        "anchor": "issue 17: the web/worker path adds <= 5% over the engine CLI at ~1-second rounds",
        "anchor_summary": "overhead vs cli, median: "
        + ", ".join(f"{w} {overhead[w]['median']:+.1%}" for w in WAYS[1:]),
    }


def format_table(rows: dict[str, dict[str, Any]], overhead: dict[str, dict[str, float]]) -> str:
    lines = [
        "| way | wall s per round, median (min-max) | engine round s | overhead vs cli, median (min-max) |",
        "|---|---:|---:|---:|",
    ]
    for way, r in rows.items():
        w = r["wall_per_round_s"]
        o = overhead.get(way)
        over = f"{o['median']:+.1%} ({o['min']:+.1%} to {o['max']:+.1%})" if o else "-"
        lines.append(
            f"| {way} | {w['median']:.2f} ({w['min']:.2f}-{w['max']:.2f}) | {r['engine_round_s']:.2f} | {over} |"
        )
    return "\n".join(lines)


def drive(payload: dict[str, Any]) -> dict[str, Any]:
    """In a fleet's environment: wait for its workers; with ``read``, the mean recorded round seconds
    of each of its experiments."""
    start_driver(payload)
    if not payload.get("read"):
        return {}
    from django.db.models import Avg

    from orchestrator.models import RoundMetric

    rows = RoundMetric.objects.values("experiment_id").annotate(mean=Avg("round_seconds")).order_by()
    # Between rounds: from one round's record to the next round's start (it ran round_seconds up to its
    # record), i.e. what recording, publishing and dispatching the next round cost the worker path.
    gaps, last = [], {}
    for pk, recorded, seconds in RoundMetric.objects.order_by("experiment_id", "round").values_list(
        "experiment_id", "recorded", "round_seconds"
    ):
        if pk in last:
            gaps.append((recorded - last[pk]).total_seconds() - seconds)
        last[pk] = recorded
    return {"round_seconds": [row["mean"] for row in rows], "gaps_s": gaps}


if __name__ == "__main__":
    print(json.dumps(drive(json.load(sys.stdin))), flush=True)
