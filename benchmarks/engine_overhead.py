"""The engine's own overhead: engine vs a plain vectorised loop vs a plain sequential loop.

The memory report's workload (the ``varying-participants`` preset: 500 clients, cohorts of 80-120,
5 local epochs, batch 20, the 784->10 model) on one CPU thread. Each contender runs in a fresh
subprocess (so its peak RSS is its own: ``ru_maxrss`` at exit), on the same data and cohort sizes,
one warm-up round then the timed rounds; the parent reports clients/s and peak RSS side by side,
and the ratios. Targets (issue 10): engine >= 1.0x the vectorised loop's clients/s, with peak RSS
no higher than the loop's + 10%.

    python -m benchmarks engine_overhead --size small      # 6 rounds, 20-sample clients
    python -m benchmarks engine_overhead --size full       # the preset's 45 rounds
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from benchmarks.common import Options

NAME = "engine_overhead"
CONTENDERS = ("engine", "vmap_loop", "plain_loop")
SIZES = {"small": {"rounds": 6, "mean_samples": 20}, "full": {"rounds": 45, "mean_samples": 100}}


def workload(size: str, device: str):
    from workers.engine.presets import preset_spec

    s = SIZES[size]
    return preset_spec("varying-participants").replace(
        rounds=s["rounds"], data={"mean_samples": s["mean_samples"]}, compute={"device": device},
        evaluation={"every": 1_000_000},
    )  # fmt: skip


def measure(contender: str, size: str, device: str) -> dict[str, Any]:
    """Run one contender in this process (call it in a fresh one): warm-up round, then the rest."""
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
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run(opts: Options) -> dict[str, Any]:
    device = "cpu" if opts.device in ("auto", "cpu") else opts.device
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    rows = {}
    for contender in CONTENDERS:
        args = [sys.executable, "-m", "benchmarks.engine_overhead", "--contender", contender, "--size", opts.size,
                "--device", device]  # fmt: skip
        out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
        rows[contender] = json.loads(out.stdout.strip().splitlines()[-1])
    engine, vmap_loop = rows["engine"], rows["vmap_loop"]
    speed = engine["clients_per_s"] / vmap_loop["clients_per_s"]
    memory = engine["peak_rss_mb"] / vmap_loop["peak_rss_mb"]
    return {
        "device": device,
        "precision": opts.precision,
        "threads": 1,
        "wall_seconds": engine["seconds"],
        "seconds_per_round": engine["seconds"] / engine["rounds"],
        "rounds_per_hour": 3600 * engine["rounds"] / engine["seconds"],
        "samples_per_s": engine["samples_per_s"],
        "achieved_tflops": None,
        "peak_tflops": None,
        "peak_fraction": None,
        "peak_vram_mb": None,
        "peak_rss_mb": engine["peak_rss_mb"],
        "workload": workload(opts.size, device).to_dict() | {"participation": "the preset's 80-120 schedule"},
        "contenders": rows,
        "ratio_clients_per_s_vs_vmap_loop": speed,
        "ratio_clients_per_s_vs_plain_loop": engine["clients_per_s"] / rows["plain_loop"]["clients_per_s"],
        "ratio_peak_rss_vs_vmap_loop": memory,
        "meets_target": speed >= 1.0 and memory <= 1.10,
        "anchor": "issue 10: engine >= 1.0x a plain vmap(grad) loop, peak RSS <= loop + 10%",
        "anchor_ratio": speed,
        "anchor_summary": f"engine {engine['clients_per_s']:.0f} vs vmap loop {vmap_loop['clients_per_s']:.0f} "
        f"clients/s ({speed:.2f}x), peak RSS {engine['peak_rss_mb']:.0f} vs {vmap_loop['peak_rss_mb']:.0f} MB "
        f"({100 * (memory - 1):+.0f}%)",
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="one contender of the engine-overhead benchmark")
    parser.add_argument("--contender", choices=CONTENDERS, required=True)
    parser.add_argument("--size", choices=tuple(SIZES), default="small")
    parser.add_argument("--device", default="cpu")
    a = parser.parse_args()
    print(json.dumps(measure(a.contender, a.size, a.device)))
