"""Process isolation: what it costs per round, and what it saves when user code leaks.

``python benchmarks/isolation_leak.py [--rounds N] [--device D]`` runs, in this process (no Celery):

1. cost: a tiny spec (rounds of a few milliseconds) with ``compute.isolation`` none vs process,
   median s/round after one warm-up round; the difference is the fixed price of a fresh child per
   round (interpreter start, ``import torch``, model and trainer set-up), whatever the round does;
2. leak: a tiny spec with ``FEDWEB_PLUGINS=benchmarks.leaky_plugin`` (a "user model" keeping 50 MB
   per training call) with isolation process vs none: the RSS of this process per round (what the
   round's ``rss_mb`` reports), its slope in MB/round, and with isolation the child's peak RSS.

Prints two small Markdown tables and writes ``benchmarks/results/isolation_leak-<cpu|cuda>.json``
(``$FEDWEB_BENCH_RESULTS`` overrides the folder). The worker-level version of the leak check is
``tests/workers/test_isolation_live.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `workers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from benchmarks.common import device_kind, results_dir, stamp
from fedweb_engine.components.plugins import PLUGINS_ENV, load_plugins
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec

LEAK_SPEC = {
    "seed": 3,
    "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 20},
    "model": {"name": "mlp", "options": {"hidden": 32}},
    "participation": {"clients_per_round": 4},  # one client group per round: one leak per round
}


def _rounds(spec: Spec, isolation: str, rounds: int) -> tuple[list, list[float | None]]:
    sim = Simulation(spec.replace(rounds=rounds, compute={"isolation": isolation}))
    results, child_peaks = [], []
    for _ in range(rounds):
        results.append(sim.next_round())
        child_peaks.append(sim.child_peak_rss_mb)
    sim.close()
    return results, child_peaks


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure_cost(device: str, rounds: int) -> dict[str, Any]:
    """Median s/round of the tiny spec without and with isolation (the first round is warm-up)."""
    spec = Spec.from_dict({**LEAK_SPEC, "compute": {"device": device}})
    out: dict[str, Any] = {"workload": LEAK_SPEC, "rounds_timed": rounds}
    for isolation in ("none", "process"):
        before = _children_cpu_seconds()
        results, _ = _rounds(spec, isolation, rounds + 1)
        out[f"{isolation}_s_per_round"] = statistics.median(r.round_seconds for r in results[1:])
        # CPU seconds per child: unlike wall time, not inflated by other load on the machine.
        out[f"{isolation}_child_cpu_s_per_round"] = (_children_cpu_seconds() - before) / (rounds + 1)
    out["added_s_per_round"] = out["process_s_per_round"] - out["none_s_per_round"]
    return out


def measure_leak(device: str, rounds: int) -> dict[str, Any]:
    """RSS per round with a model leaking 50 MB per round, isolated and in-process."""
    os.environ[PLUGINS_ENV] = "benchmarks.leaky_plugin"  # the isolated child loads it from here
    load_plugins()
    spec = Spec.from_dict({**LEAK_SPEC, "compute": {"device": device}})
    out: dict[str, Any] = {"workload": LEAK_SPEC, "leak_mb_per_round": 50, "rounds": rounds}
    for isolation in ("process", "none"):
        results, child_peaks = _rounds(spec, isolation, rounds)
        rss = [r.rss_mb for r in results]
        out[isolation] = {
            "rss_mb": rss,
            "rss_slope_mb_per_round": float(np.polyfit(np.arange(2, rounds + 1), rss[1:], 1)[0]),
            "child_peak_rss_mb": child_peaks if isolation == "process" else None,
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8, help="rounds of each run")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    cost = measure_cost(args.device, args.rounds)  # first: no plugin loaded yet
    leak = measure_leak(args.device, args.rounds)
    print("| tiny spec | s/round none | s/round process | added by isolation | child CPU s/round |")
    print("|---|---|---|---|---|")
    print(
        f"| {args.device} | {cost['none_s_per_round']:.3f} | {cost['process_s_per_round']:.3f} "
        f"| {cost['added_s_per_round']:+.3f} s | {cost['process_child_cpu_s_per_round']:.2f} |"
    )
    print("\n| leak 50 MB/round | RSS per round (MB) | slope MB/round | child peak RSS (MB) |\n|---|---|---|---|")
    for isolation in ("process", "none"):
        row = leak[isolation]
        peaks = row["child_peak_rss_mb"]
        print(
            f"| isolation {isolation} | {' '.join(f'{v:.0f}' for v in row['rss_mb'])} "
            f"| {row['rss_slope_mb_per_round']:+.1f} | {' '.join(f'{v:.0f}' for v in peaks) if peaks else '-'} |"
        )
    command = "python benchmarks/isolation_leak.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {
        "benchmark": "isolation_leak",
        **stamp(command.strip(), args.device),
        "device": args.device,
        "cost": cost,
        "leak": leak,
    }
    path = results_dir() / f"isolation_leak-{device_kind(args.device)}.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"  -> {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
