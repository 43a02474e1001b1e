"""TFF's "simulations with accelerators" tutorial: cnn-14-4, 16 clients per round, s/round.

Anchor: TFF needed 5.00 s/round on one GPU and 7.63 s/round on CPU for EMNIST writers (~100
samples each), 1 local epoch, batch 16, SGD 0.01. Ours on EMNIST-shaped ``synthetic_images``.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import Options, apply_options, extrapolate_round_seconds, run_engine, summarise
from fedweb_engine.spec.presets import preset_spec

NAME = "tff_accelerators"
ANCHOR_SECONDS = {"cuda": 5.00, "cpu": 7.63}
FULL_CLIENTS, FULL_MEAN_SAMPLES = 16, 100
# Small: 4 clients of ~10 samples; cnn-14-4 costs ~1.9 GFLOP per sample, so even this is seconds on a CPU.
SIZES = {
    "full": {"clients": FULL_CLIENTS, "mean_samples": FULL_MEAN_SAMPLES, "num_clients": 3400, "warmup": 2, "timed": 10},
    "small": {"clients": 4, "mean_samples": 10, "num_clients": 40, "warmup": 1, "timed": 2},
}


def run(opts: Options) -> dict[str, Any]:
    size = SIZES[opts.size]
    spec = preset_spec("tff-accelerators").replace(
        rounds=size["warmup"] + size["timed"],
        data={"num_clients": size["num_clients"], "mean_samples": size["mean_samples"]},
        participation={"clients_per_round": size["clients"]},
        evaluation={"every": 1_000_000},  # TFF timed training rounds; we evaluate only after the last
    )
    spec = apply_options(spec, opts, client_group_size=size["clients"])
    summary = summarise(run_engine(spec, warmup=size["warmup"], desc=NAME), opts.precision)
    kind = "cuda" if summary["device"].startswith("cuda") else "cpu"
    anchor = ANCHOR_SECONDS[kind]
    per_round = summary["seconds_per_round"]
    extrapolated = opts.size != "full"
    if extrapolated:
        per_round = extrapolate_round_seconds(summary, FULL_CLIENTS * FULL_MEAN_SAMPLES)
    ratio = anchor / per_round if per_round else None
    label = "EXTRAPOLATED full-size " if extrapolated else ""
    return {
        **summary,
        "workload": spec.to_dict(),
        "anchor": f"TFF {anchor:.2f} s/round ({'GPU' if kind == 'cuda' else 'CPU'})",
        "full_seconds_per_round": per_round,
        "full_seconds_per_round_is_extrapolated": extrapolated,
        "anchor_ratio": ratio,
        "anchor_summary": f"{label}{per_round:.2f} s/round vs {anchor:.2f}: {ratio:.2f}x" if ratio else "-",
        "target": "<= 0.25 s/round on one H100/H200 (>= 20x TFF's GPU figure)",
    }
