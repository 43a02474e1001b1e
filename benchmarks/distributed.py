"""``python -m benchmarks distributed [--size small|full] [--device cpu|cuda]``: one experiment on 1 rank
and on 2 ranks of a ``torch.distributed`` group, through the engine's command line (what a researcher
runs without the web service: ``python -m fedweb_engine run spec.json`` with ``compute.ranks``).

Configurations, each a fresh process, run interleaved (every configuration once per repeat, in turn):

* ``1 rank, 1 thread`` and ``1 rank, 2 threads``: the undistributed run, its torch threads pinned with
  ``OMP_NUM_THREADS``. The faster of the two *in each repeat* is the baseline: a skilled user on this
  machine would give one process both cores, or leave it one if intra-op threads do not pay on these
  small per-client batches; either way the baseline is the best one process does with the machine;
* ``2 ranks, 1 thread each``: rank 0 and one member process (Gloo on CPU), the cohort split between
  them. On a machine with GPUs (``--device cuda``) the same with NCCL, one GPU per rank, and the
  baseline is one rank on one GPU.

Seconds per round are the median of each run's ``round_seconds`` after its first round (the first
includes building the data and model; the group's set-up is reported apart: it happens once per hold).
Speedup = baseline seconds ÷ 2-rank seconds, per repeat; the record gives its median with min-max and
whether the spread crosses 1.0, the all-reduce seconds per round, the group set-up and the members'
build seconds, and the 1-minute load average around every run.

Two workloads: **heavy**, the CNN on 28x28 digits, 100 clients a round (all of them), 3 local epochs,
batch 20 (each client trains alone: CNNs are not vectorised on a CPU); **light**, the mlp on 8x8 digits,
20 clients of 100 a round, one epoch, where a round takes milliseconds and the reduction's fixed costs
show. (The file-based shards this replaces are gone: there is nothing to compare them in the same run.)
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Options
from benchmarks.contenders import describe, spread

ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {
    "heavy": {
        "seed": 1, "rounds": 6,
        "data": {"name": "digits", "options": {"image_size": 28}, "num_clients": 100},
        "model": {"name": "cnn"},
        "participation": {"clients_per_round": 100},
        "local": {"epochs": 3, "batch_size": 20},
        "evaluation": {"every": 100},
    },
    "light": {
        "seed": 1, "rounds": 40,
        "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 100},
        "model": {"name": "mlp", "options": {"hidden": 64}},
        "participation": {"clients_per_round": 20},
        "local": {"epochs": 1, "batch_size": 20},
        "evaluation": {"every": 1000},
    },
}  # fmt: skip
# --size small: a check of the path (minutes in the suite), not a measurement.
SMALL = {"heavy": {"rounds": 2, "participation": {"clients_per_round": 20}, "local": {"epochs": 1, "batch_size": 20}},
         "light": {"rounds": 6}}  # fmt: skip
# (label, ranks, torch threads per process)
CONFIGS = [("1 rank, 1 thread", 1, 1), ("1 rank, 2 threads", 1, 2), ("2 ranks, 1 thread each", 2, 1)]
REPEATS = {"full": 3, "small": 1}
GOALS = {"heavy": 1.6, "light": 0.95}


def run(opts: Options) -> dict[str, Any]:
    device = "cuda" if opts.device.startswith("cuda") else "cpu"
    repeats = REPEATS[opts.size]
    runs: dict[str, dict[str, list[dict]]] = {w: {c[0]: [] for c in CONFIGS} for w in WORKLOADS}
    with tempfile.TemporaryDirectory(prefix="fedweb-distributed-") as tmp:
        for repeat in range(repeats):
            for workload, spec in WORKLOADS.items():
                if opts.size == "small":
                    spec = {**spec, **SMALL[workload]}
                for label, ranks, threads in CONFIGS:
                    print(f"repeat {repeat + 1}/{repeats} {workload}: {label}", file=sys.stderr, flush=True)
                    runs[workload][label].append(_one(Path(tmp), spec, device, ranks, threads))
    record: dict[str, Any] = {"device": device, "repeats": repeats, "workloads": {}}
    for workload in WORKLOADS:
        record["workloads"][workload] = _summarise(workload, runs[workload])
    record["table"] = _table(record)
    print(record["table"])
    return record


def _one(tmp: Path, spec: dict, device: str, ranks: int, threads: int) -> dict[str, Any]:
    path = tmp / f"spec-{ranks}-{threads}.json"
    path.write_text(json.dumps({**spec, "compute": {"device": device, "ranks": ranks}}))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "fedweb_engine", "run", str(path), "--quiet"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"the run with {ranks} rank(s) failed: {proc.stderr[-2000:]}")
    rounds = [json.loads(line) for line in proc.stdout.splitlines()]
    timed = rounds[1:] or rounds
    formed = re.search(r"formed in ([\d.]+) s; members built in ([\d.]+) s", proc.stderr)
    return {
        "seconds_per_round": statistics.median(r["round_seconds"] for r in timed),
        "allreduce_seconds": statistics.median(r["allreduce_seconds"] for r in timed) if ranks > 1 else None,
        "rank_train_seconds": [statistics.median(r["rank_train_seconds"][k] for r in timed) for k in range(ranks)]
        if ranks > 1 else None,
        "setup_seconds": float(formed.group(1)) if formed else None,
        "members_built_seconds": float(formed.group(2)) if formed else None,
        "process_seconds": time.perf_counter() - started,
        "final_train_loss": rounds[-1]["train_loss"],
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }  # fmt: skip


def _summarise(workload: str, runs: dict[str, list[dict]]) -> dict[str, Any]:
    one_1, one_2, two = (runs[c[0]] for c in CONFIGS)
    base = [min(a["seconds_per_round"], b["seconds_per_round"]) for a, b in zip(one_1, one_2, strict=True)]
    speedup = spread([b / t["seconds_per_round"] for b, t in zip(base, two, strict=True)])
    loss = {label: rows[-1]["final_train_loss"] for label, rows in runs.items()}
    # Where the time goes, per repeat: what a second thread gives one process, how much slower a rank
    # trains its half of the cohort than half of the 1-thread round (two busy processes on the cores),
    # and a 2-rank round's seconds beyond its slowest rank's training (command, all-reduce, barrier).
    threads_gain = spread([a["seconds_per_round"] / b["seconds_per_round"] for a, b in zip(one_1, one_2, strict=True)])
    rank_slowdown = spread([statistics.mean(t["rank_train_seconds"]) / (a["seconds_per_round"] / 2)
                            for a, t in zip(one_1, two, strict=True)])  # fmt: skip
    beyond = [t["seconds_per_round"] - max(t["rank_train_seconds"]) for t in two]
    return {
        "spec": WORKLOADS[workload],
        "runs": runs,
        "seconds_per_round": {label: spread([r["seconds_per_round"] for r in rows]) for label, rows in runs.items()},
        "baseline": "the faster of 1 rank with 1 and with 2 torch threads, per repeat",
        "speedup_2_ranks": speedup,
        "summary": describe("2 ranks / best 1 rank", speedup),
        "speedup_vs_1_thread": spread(
            [a["seconds_per_round"] / t["seconds_per_round"] for a, t in zip(one_1, two, strict=True)]
        ),
        "threads_gain_1_rank": threads_gain,
        "rank_train_vs_half_of_1_thread": rank_slowdown,
        "seconds_beyond_slowest_rank_median": statistics.median(beyond),
        "allreduce_share_of_round_median": statistics.median(
            t["allreduce_seconds"] / t["seconds_per_round"] for t in two
        ),
        "goal": GOALS[workload],
        "meets_goal": speedup["median"] >= GOALS[workload],
        "allreduce_seconds_median": statistics.median(r["allreduce_seconds"] for r in two),
        "setup_seconds_median": statistics.median(r["setup_seconds"] for r in two),
        "members_built_seconds_median": statistics.median(r["members_built_seconds"] for r in two),
        "final_train_loss": loss,  # the same run, whatever the ranks (to float summation order)
        "load_1min": [x for rows in runs.values() for r in rows for x in r["load_1min"]],
    }


def _table(record: dict[str, Any]) -> str:
    lines = [
        "| workload | 1 rank, 1 thread s/round | 1 rank, 2 threads s/round | 2 ranks s/round | speedup (min-max) "
        "| all-reduce s/round | group set-up s | load (1 min) |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for name, w in record["workloads"].items():
        s = w["seconds_per_round"]
        sp = w["speedup_2_ranks"]
        loads = w["load_1min"]
        lines.append(
            f"| {name} | {s[CONFIGS[0][0]]['median']:.3f} | {s[CONFIGS[1][0]]['median']:.3f} "
            f"| {s[CONFIGS[2][0]]['median']:.3f} | {sp['median']:.2f}x ({sp['min']:.2f}-{sp['max']:.2f})"
            f"{' crosses 1.0' if sp['crosses_1'] else ''} | {w['allreduce_seconds_median']:.4f} "
            f"| {w['setup_seconds_median']:.3f} | {min(loads):.2f}-{max(loads):.2f} |"
        )
    return "\n".join(lines)
