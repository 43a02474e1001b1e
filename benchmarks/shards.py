"""``python -m benchmarks shards [--size small|full]``: one experiment's rounds sharded over real workers.

Each configuration gets a fresh local FedWeb (``benchmarks.fleet.LocalFleet``: its own SQLite database, N
Celery CPU workers, each ``--concurrency 1`` with one torch thread, the Redis at ``$REDIS_URL`` as broker)
and a driver that submits one experiment through the ORM and reads its rounds back from the database:

* ``1 worker, unsharded``: ``compute.shards: 1``, the reference;
* ``1 worker, N shards`` (N = 2, 4): every shard task on the same worker, one after the other, so the
  difference to the reference is what sharding adds per round (fan-out, one task per shard, the partial
  files, the conclusion), with no parallelism to hide it;
* ``N workers, N shards`` (N = 2, 4): the fleet the feature is for.

Seconds per round are wall-clock, from the database: the time between the first and the last recorded
round over the rounds in between (round 1 is the warm-up: each worker builds the data and the model on
its first task). That includes everything a user waits for (dispatch, tasks, checkpoints, recording).
Speedup is against ``1 worker, unsharded`` of the same repeat. On a machine with fewer free cores than
workers the workers share cores: the expectation is at most cores x, and 4 workers on 2 cores
oversubscribe them.

Repeats (``--size full``: 3): every configuration, the controls included, runs once per repeat, in the
same order. The no-parallelism controls (``1 worker, unsharded`` and ``1 worker, N shards``) say how far a
speedup moves with no extra core at all; a fleet whose median speedup lies inside the controls' spread
(min to max over the repeats, 1.0 included) is reported as **no measurable difference**, not as a
speedup. Why this baseline: the same experiment unsharded on one worker is what a user runs without the
feature, and sharding on one worker isolates what the feature itself costs.

Workload (``--size full``): clients that are compute-heavy, so that one unsharded round takes a few
seconds here: the CNN on 28x28 digits, 16 clients per round of 64, 10 local epochs, batch 10, trained one
client at a time. ``--size small`` is a quick check of the same path (1 epoch, 8 clients, 3 rounds), on
one fleet grown to each configuration's number of workers instead of one fleet per configuration.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from typing import Any

from benchmarks.common import Options
from benchmarks.contenders import spread
from benchmarks.fleet import LocalFleet, bench_user, cpu_seconds, start_driver, wait_until_finished

SPEC = {
    "seed": 1, "rounds": 8,
    "data": {"name": "digits", "options": {"image_size": 28}, "num_clients": 64},
    "model": {"name": "cnn"},
    "participation": {"clients_per_round": 16},
    "local": {"epochs": 10, "batch_size": 10},
    "compute": {"device": "cpu", "training": "sequential"},
}  # fmt: skip
SMALL = {**SPEC, "rounds": 3, "participation": {"clients_per_round": 8}, "local": {"epochs": 1, "batch_size": 10}}
# (workers, shards): the reference, sharding on one worker (its overhead), then the fleet.
CONFIGS = [(1, 1), (1, 2), (1, 4), (2, 2), (4, 4)]
DEADLINE_S = 300.0
REPEATS = {"full": 3, "small": 1}  # small: a check of the path, not a measurement


def run(opts: Options) -> dict[str, Any]:
    """The entry point of ``python -m benchmarks shards``: with ``--size full`` every configuration on
    its own fresh fleet, ``REPEATS`` times; ``--size small``, a quick check of the path, runs the
    configurations one after the other on one fleet, started with one worker and grown to each
    configuration's number (4 worker start-ups and one database instead of 12 and 5), once."""
    spec = SPEC if opts.size == "full" else SMALL
    groups = [[c] for c in CONFIGS] if opts.size == "full" else [sorted(CONFIGS)]
    t0, repeats = time.time(), []
    for repeat in range(REPEATS[opts.size]):
        rows = {}
        for group in groups:
            with LocalFleet(group[0][0]) as fleet:
                for workers, n in group:
                    fleet.grow(workers)
                    label = config_label(workers, n)
                    print(f"shards: repeat {repeat + 1}, {label}", file=sys.stderr, flush=True)
                    payload = {"spec": shard_spec(spec, n)}
                    rows[label] = fleet.drive("benchmarks.shards", payload, timeout=DEADLINE_S + 150)
        base = rows[config_label(1, 1)]["seconds_per_round"]
        for r in rows.values():
            r["speedup"] = base / r["seconds_per_round"]
        repeats.append(rows)
    return summarise(repeats, opts, time.time() - t0, spec)


def summarise(repeats: list[dict[str, dict[str, Any]]], opts: Options, wall: float, spec: dict) -> dict[str, Any]:
    """Medians per configuration, each speedup's spread, and the verdict against the controls' spread."""
    labels = list(repeats[0])
    rows: dict[str, dict[str, Any]] = {}
    for label in labels:
        runs = [rep[label] for rep in repeats]
        numeric = [k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        rows[label] = {k: statistics.median(r[k] for r in runs) for k in numeric}
        rows[label]["speedup_spread"] = spread([r["speedup"] for r in runs])
    controls = [rep[config_label(1, n)]["speedup"] for rep in repeats for w, n in CONFIGS if w == 1]
    band = (min(controls), max(controls))
    for label, row in rows.items():
        s = row["speedup"]
        if label.startswith("1 worker"):
            row["verdict"] = "control"
        elif band[0] <= s <= band[1]:
            row["verdict"] = "no measurable difference"
        else:
            row["verdict"] = "faster" if s > band[1] else "slower"
    base = rows[config_label(1, 1)]
    overhead = {
        n: rows[config_label(1, n)]["seconds_per_round"] - base["seconds_per_round"]
        for w, n in CONFIGS
        if w == 1 and n > 1
    }
    cpu_overhead = {
        n: rows[config_label(1, n)]["worker_cpu_seconds_per_round"] - base["worker_cpu_seconds_per_round"]
        for w, n in CONFIGS if w == 1 and n > 1
    }  # fmt: skip
    table = format_table(rows)
    print(table, flush=True)

    def said(label: str) -> str:
        r = rows[label]
        return f"{label.split(',')[0]} {r['speedup']:.2f}x ({r['verdict']})"

    return {
        "command": f"python -m benchmarks shards --size {opts.size}",
        "device": f"up to {max(w for w, _ in CONFIGS)} local CPU workers on {os.cpu_count()} CPUs",
        "cpus": os.cpu_count(),
        "precision": "fp32",
        "repeats": len(repeats),
        "wall_seconds": wall,
        "seconds_per_round": base["seconds_per_round"],
        "spec": spec,
        "configs": rows,
        "runs": repeats,
        "control_speedup_spread": {"min": band[0], "max": band[1]},
        "overhead_seconds_per_round": overhead,
        "overhead_cpu_seconds_per_round": cpu_overhead,
        "table": table,
        "anchor": "issue 10: speedup for 1, 2 and 4 CPU workers, and the per-round overhead of sharding",
        "anchor_ratio": rows[config_label(2, 2)]["speedup"],
        "anchor_summary": f"median of {len(repeats)}: {said(config_label(2, 2))}, {said(config_label(4, 4))}; "
        f"no-parallelism controls {band[0]:.2f}-{band[1]:.2f}x",
    }


def config_label(workers: int, shards: int) -> str:
    return f"{workers} worker{'s' if workers > 1 else ''}, " + ("unsharded" if shards == 1 else f"{shards} shards")


def shard_spec(spec: dict[str, Any], shards: int) -> dict[str, Any]:
    return {**spec, "compute": {**spec["compute"], "shards": shards}}


def format_table(rows: dict[str, dict[str, Any]]) -> str:
    """The markdown table of the medians (``shards_cpu.md`` embeds it; a test regenerates it)."""
    base = rows[config_label(1, 1)]["seconds_per_round"]
    lines = [
        "| configuration | s/round | speedup vs 1 worker (min-max) | verdict | vs unsharded on 1 worker "
        "| worker CPU s/round | load avg |",
        "|---|---:|---:|---|---:|---:|---:|",
    ]
    for label, r in rows.items():
        extra, sp = r["seconds_per_round"] - base, r["speedup_spread"]
        lines.append(
            f"| {label} | {r['seconds_per_round']:.2f} | {r['speedup']:.2f}x ({sp['min']:.2f}-{sp['max']:.2f}) "
            f"| {r['verdict']} | {extra:+.2f} s | {r['worker_cpu_seconds_per_round']:.2f} "
            f"| {r['load_average_before']:.1f} |"
        )
    return "\n".join(lines)


def drive(payload: dict[str, Any]) -> dict[str, Any]:
    """In the fleet's environment: run one experiment to the end; its wall seconds per round."""
    start_driver(payload)
    from orchestrator.models import Experiment

    e = Experiment.objects.create(owner=bench_user("shards"), name="shards", spec=payload["spec"])
    load = os.getloadavg()[0]
    e.start()
    t0, cpu_after_warmup = time.time(), None

    def note_warmup() -> None:  # the workers' CPU seconds once the first round (start-up) is recorded
        nonlocal cpu_after_warmup
        if cpu_after_warmup is None and e.rounds.exists():
            cpu_after_warmup = cpu_seconds(payload["worker_pids"])

    wait_until_finished([e.pk], t0, DEADLINE_S, 0.1, note_warmup)
    cpu = cpu_seconds(payload["worker_pids"]) - (cpu_after_warmup or 0.0)
    e.refresh_from_db()
    if e.status != "completed":
        raise RuntimeError(f"the experiment ended {e.status}: {e.error}")
    rounds = list(e.rounds.order_by("round"))
    recorded = [r.recorded for r in rounds]
    timed = len(rounds) - 1
    return {
        "rounds": len(rounds),
        "seconds_per_round": (recorded[-1] - recorded[0]).total_seconds() / timed,
        "engine_round_seconds": sum(r.round_seconds for r in rounds[1:]) / timed,
        "worker_cpu_seconds_per_round": cpu / timed,
        "load_average_before": load,
        "load_average_after": os.getloadavg()[0],
        "first_round_s": (recorded[0] - e.queued_at).total_seconds(),
        "final_test_accuracy": rounds[-1].test_accuracy,
    }


if __name__ == "__main__":
    print(json.dumps(drive(json.load(sys.stdin))), flush=True)
