"""FLUTE vs FedML's CNN_FEMNIST: 3,400 clients, 1,500 rounds x 10 clients, batch 20, total time.

Anchor: FLUTE 8 min 22 s (502 s) on 4 GPUs (FedML: 5 h 50 min). Ours on one device, FEMNIST-shaped
``synthetic_images`` with 62 classes and ~200 samples per writer (real FEMNIST's 671,585 training
samples over 3,400 writers average 198).
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import Options, apply_options, femnist_spec, run_engine, summarise, whole_run_seconds
from fedweb_engine.spec.schema import Spec

NAME = "flute_femnist"
ANCHOR_SECONDS = 502.0
FULL_ROUNDS, FULL_CLIENTS, FULL_MEAN_SAMPLES = 1500, 10, 200
SIZES = {
    "full": {"num_clients": 3400, "mean_samples": FULL_MEAN_SAMPLES, "clients": FULL_CLIENTS, "rounds": FULL_ROUNDS},
    "small": {"num_clients": 100, "mean_samples": 20, "clients": 4, "rounds": 4},
}


def workload(opts: Options) -> Spec:
    size = SIZES[opts.size]
    spec = femnist_spec(
        num_clients=size["num_clients"],
        mean_samples=size["mean_samples"],
        clients=size["clients"],
        rounds=size["rounds"],
        eval_every=100 if opts.size == "full" else 1_000_000,
    )
    return apply_options(spec, opts, client_group_size=size["clients"])


def run(opts: Options) -> dict[str, Any]:
    spec = workload(opts)
    run_ = run_engine(spec, warmup=1, desc=NAME)
    summary = summarise(run_, opts.precision)
    # FLUTE's figure is the whole run: set-up and every round, the warm-up one included.
    total, extrapolated = whole_run_seconds(
        run_, summary, opts, full_samples_per_round=FULL_CLIENTS * FULL_MEAN_SAMPLES, full_rounds=FULL_ROUNDS
    )
    ratio = ANCHOR_SECONDS / total if total else None
    label = "EXTRAPOLATED full-size " if extrapolated else ""
    return {
        **summary,
        "workload": spec.to_dict(),
        "anchor": "FLUTE 502 s (8 min 22 s) on 4 GPUs; FedML 5 h 50 min",
        "full_total_seconds": total,
        "full_total_seconds_is_extrapolated": extrapolated,
        "anchor_ratio": ratio,
        "anchor_summary": f"{label}{total:.0f} s total vs 502 s: {ratio:.2f}x" if ratio else "-",
        "target": "all 1,500 rounds in <= 120 s on ONE H100/H200",
    }
