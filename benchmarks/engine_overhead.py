"""The engine's own overhead: engine vs a compacted vectorised loop vs a plain sequential loop.

The memory report's workload (the ``varying-participants`` preset: 500 clients, cohorts of 80-120,
5 local epochs, batch 20, the 784->10 model) on one CPU thread. The contenders run interleaved
(engine, compacted loop, sequential loop, engine, ...), ``repeats`` times, each run in a fresh
process on the same data and cohort sizes: one warm-up round, then the timed rounds. Each run's
peak RSS is its own (:mod:`benchmarks.contenders`: VmHWM after a reset, and psutil samples from
outside). The record gives each ratio's min / median / max over the repeats; the headline is the
median, and the summary says when the spread crosses 1.0.

Why these baselines: ``benchmarks/plain_vmap.py`` is the fastest simple loop for this workload (it
vmaps, per step, only the clients that still have a batch); ``benchmarks/plain.py`` is the loop
everyone writes first. The run checks the first baseline is real: it must be at least
``VALID_BASELINE_RATIO`` times the sequential loop's clients/s (median), else the record says the
baseline is invalid. Targets (issue 10): engine >= 1.0x the vectorised loop's clients/s, with peak
RSS no higher than the loop's + 10%.

    python -m benchmarks engine_overhead --size small      # 4 rounds, 20-sample clients
    python -m benchmarks engine_overhead --size full       # the preset's 45 rounds
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from benchmarks.common import Options
from benchmarks.contenders import describe, dump, own_peak_rss_mb, reset_peak_rss, run_contender, spread

NAME = "engine_overhead"
CONTENDERS = ("engine", "vmap_loop", "plain_loop")
SIZES = {"small": {"rounds": 4, "mean_samples": 20}, "full": {"rounds": 45, "mean_samples": 100}}
REPEATS = 3
VALID_BASELINE_RATIO = 1.8  # compacted vmap loop / sequential loop on this workload (issue 22)


def workload(size: str, device: str):
    from workers.engine.presets import preset_spec

    s = SIZES[size]
    return preset_spec("varying-participants").replace(
        rounds=s["rounds"], data={"mean_samples": s["mean_samples"]}, compute={"device": device},
        evaluation={"every": 1_000_000},
    )  # fmt: skip


def measure(contender: str, size: str, device: str) -> dict[str, Any]:
    """Run one contender in this process (call it in a fresh one): warm-up round, then the rest."""
    reset = reset_peak_rss()
    import torch

    torch.set_num_threads(1)
    spec = workload(size, device)
    if contender == "engine":
        from workers.engine.runner import Simulation

        sim = Simulation(spec)
        step = sim.next_round
    else:
        from benchmarks.plain import PlainFedAvg
        from benchmarks.plain_vmap import VmapFedAvg
        from workers.engine.data import build_data

        loop = (VmapFedAvg if contender == "vmap_loop" else PlainFedAvg)(
            spec, build_data(spec.data, spec.seed), torch.device(spec.compute.device)
        )
        step = loop.next_round
    step()  # warm-up: allocator, vmap tracing, first-touch of the data
    clients = samples = 0
    # The whole round on both sides (the engine's cohort planning and broadcast included).
    t0 = time.perf_counter()
    for _ in range(spec.rounds - 1):
        r = step()
        clients += getattr(r, "clients", None) or r.participants
        samples += r.samples
    seconds = time.perf_counter() - t0
    return {
        "contender": contender,
        "rounds": spec.rounds - 1,
        "clients_per_s": clients / seconds,
        "samples_per_s": samples / seconds,
        "seconds": seconds,
        "final_train_loss": r.train_loss,
        "peak_rss_mb": own_peak_rss_mb(),
        "peak_rss_reset": reset,
    }


def run(opts: Options) -> dict[str, Any]:
    device = "cpu" if opts.device in ("auto", "cpu") else opts.device
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    runs: list[dict[str, Any]] = []
    for repeat in range(REPEATS):
        for contender in CONTENDERS:  # interleaved: A B C A B C ...
            args = [sys.executable, "-m", "benchmarks.engine_overhead", "--contender", contender, "--size", opts.size,
                    "--device", device]  # fmt: skip
            runs.append(run_contender(args, env) | {"repeat": repeat})
    return summarise(runs, opts, device)


def _by(runs: list[dict[str, Any]], contender: str, key: str) -> list[float]:
    return [r[key] for r in runs if r["contender"] == contender]


def _rss(row: dict[str, Any]) -> float:
    return row["peak_rss_mb"] if row["peak_rss_mb"] is not None else row["sampled_peak_rss_mb"]


def summarise(runs: list[dict[str, Any]], opts: Options, device: str) -> dict[str, Any]:
    """Per-repeat ratios and their spreads, per-contender medians, the validity check."""
    by_repeat = {r["repeat"]: {} for r in runs}
    for r in runs:
        by_repeat[r["repeat"]][r["contender"]] = r
    ratios = {
        "engine_vs_vmap_loop": [x["engine"]["clients_per_s"] / x["vmap_loop"]["clients_per_s"] for x in by_repeat.values()],
        "engine_vs_plain_loop": [x["engine"]["clients_per_s"] / x["plain_loop"]["clients_per_s"] for x in by_repeat.values()],
        "vmap_loop_vs_plain_loop": [x["vmap_loop"]["clients_per_s"] / x["plain_loop"]["clients_per_s"] for x in by_repeat.values()],
        "peak_rss_engine_vs_vmap_loop": [_rss(x["engine"]) / _rss(x["vmap_loop"]) for x in by_repeat.values()],
    }  # fmt: skip
    spreads = {k: spread(v) for k, v in ratios.items()}
    contenders = {
        c: {
            "clients_per_s": statistics.median(_by(runs, c, "clients_per_s")),
            "samples_per_s": statistics.median(_by(runs, c, "samples_per_s")),
            "peak_rss_mb": statistics.median(_rss(r) for r in runs if r["contender"] == c),
            "sampled_peak_rss_mb": statistics.median(_by(runs, c, "sampled_peak_rss_mb")),
            "final_train_loss": _by(runs, c, "final_train_loss")[-1],
        }
        for c in CONTENDERS
    }
    speed, memory = spreads["engine_vs_vmap_loop"]["median"], spreads["peak_rss_engine_vs_vmap_loop"]["median"]
    baseline = spreads["vmap_loop_vs_plain_loop"]["median"]
    valid = baseline >= VALID_BASELINE_RATIO
    engine = contenders["engine"]
    seconds = statistics.median(_by(runs, "engine", "seconds"))
    rounds = runs[0]["rounds"]
    summary = (
        f"{describe('engine/vmap loop', spreads['engine_vs_vmap_loop'])}; "
        f"{describe('engine/sequential', spreads['engine_vs_plain_loop'])}; peak RSS "
        f"{engine['peak_rss_mb']:.0f} vs {contenders['vmap_loop']['peak_rss_mb']:.0f} MB ({100 * (memory - 1):+.0f}%)"
    )
    if not valid:
        summary += f"; BASELINE INVALID: vmap loop only {baseline:.2f}x the sequential loop (< {VALID_BASELINE_RATIO}x)"
    return {
        "device": device,
        "precision": opts.precision,
        "threads": 1,
        "repeats": REPEATS,
        "order": "interleaved: " + ", ".join(CONTENDERS) + ", repeated; each run a fresh process",
        "wall_seconds": seconds,
        "seconds_per_round": seconds / rounds,
        "rounds_per_hour": 3600 * rounds / seconds,
        "samples_per_s": engine["samples_per_s"],
        "achieved_tflops": None,
        "peak_tflops": None,
        "peak_fraction": None,
        "peak_vram_mb": None,
        "peak_rss_mb": engine["peak_rss_mb"],
        "peak_rss_method": "VmHWM after a /proc/self/clear_refs reset, in each contender's own process; "
        "sampled_peak_rss_mb: psutil RSS from outside every 10 ms",
        "workload": workload(opts.size, device).to_dict() | {"participation": "the preset's 80-120 schedule"},
        "contenders": contenders,
        "runs": runs,
        "ratios": spreads,
        "ratio_clients_per_s_vs_vmap_loop": speed,
        "ratio_clients_per_s_vs_plain_loop": spreads["engine_vs_plain_loop"]["median"],
        "ratio_peak_rss_vs_vmap_loop": memory,
        "baseline_check": {
            "rule": f"vmap loop >= {VALID_BASELINE_RATIO}x the sequential loop (median clients/s)",
            "ratio": baseline,
            "valid": valid,
        },
        "meets_target": valid and speed >= 1.0 and memory <= 1.10,
        "anchor": "issue 10: engine >= 1.0x a compacted vmap(grad) loop, peak RSS <= loop + 10%",
        "anchor_ratio": speed,
        "anchor_summary": summary,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one contender of the engine-overhead benchmark")
    parser.add_argument("--contender", choices=CONTENDERS, required=True)
    parser.add_argument("--size", choices=tuple(SIZES), default="small")
    parser.add_argument("--device", default="cpu")
    a = parser.parse_args()
    dump(measure(a.contender, a.size, a.device))
