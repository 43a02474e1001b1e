"""The engine against a plain sequential PyTorch FedAvg loop on the same workload, same process.

Small FEMNIST-shaped clients trained with the engine's own choice of mode (vectorised groups on a GPU;
full: 128 clients per round in
one group of 128; small: 16), against :class:`benchmarks.plain.PlainFedAvg`, round for round
interleaved. Targets: >= 1.0x clients/s on CPU, >= 10x on one GPU.
"""

from __future__ import annotations

import resource
from typing import Any

import torch

from benchmarks.common import Options, apply_options, femnist_spec, peak_tflops
from benchmarks.engine_throughput import compare
from fedweb_engine.data import build_data
from fedweb_engine.models import build_model, flops_per_sample
from fedweb_engine.spec.schema import Spec

NAME = "vs_plain"
TARGET = {"cpu": 1.0, "cuda": 10.0}
SIZES = {
    "full": {"num_clients": 1000, "mean_samples": 20, "clients": 128, "warmup": 1, "timed": 10},
    "small": {"num_clients": 200, "mean_samples": 10, "clients": 16, "warmup": 1, "timed": 2},
}


def workload(opts: Options) -> Spec:
    size = SIZES[opts.size]
    spec = femnist_spec(
        num_clients=size["num_clients"],
        mean_samples=size["mean_samples"],
        clients=size["clients"],
        rounds=size["warmup"] + size["timed"],
        eval_every=1_000_000,
    )
    # "auto": the engine's own choice for the device (vectorised on GPUs; on CPUs, CNNs one client
    # at a time, since vmapped convolutions run slower there).
    return apply_options(spec, opts, client_group_size=size["clients"], training="auto")


def run(opts: Options) -> dict[str, Any]:
    size = SIZES[opts.size]
    spec = workload(opts)
    if spec.compute.device != "cpu" and torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()
    res = compare(spec, rounds=size["timed"], warmup=size["warmup"], desc=NAME)
    data = build_data(spec.data, spec.seed)
    flops = flops_per_sample(build_model(spec.model, data.input_shape, data.num_classes), data.input_shape)
    kind = "cuda" if res["device"].startswith("cuda") else "cpu"
    achieved = flops * res["engine_samples_per_s"] / 1e12
    peak, source = peak_tflops(kind, res["device"], opts.precision)
    seconds_per_round = res["engine_seconds"] / size["timed"]
    ratio = res["ratio_clients_per_s"]
    return {
        **res,
        "precision": opts.precision,
        "workload": spec.to_dict(),
        "flops_per_sample": flops,
        "wall_seconds": res["engine_seconds"] + res["plain_seconds"],
        "seconds_per_round": seconds_per_round,
        "rounds_per_hour": 3600 / seconds_per_round,
        "samples_per_s": res["engine_samples_per_s"],
        "achieved_tflops": achieved,
        "peak_tflops": peak,
        "peak_source": source,
        "peak_fraction": achieved / peak if peak else None,
        "peak_vram_mb": torch.cuda.max_memory_allocated() / 2**20 if kind == "cuda" else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "anchor": f"target >= {TARGET[kind]:.0f}x the plain loop's clients/s on {kind.upper()}",
        "anchor_ratio": ratio,
        "anchor_summary": f"engine {res['engine_clients_per_s']:.1f} vs plain {res['plain_clients_per_s']:.1f} clients/s: "
        f"{ratio:.2f}x (target {TARGET[kind]:.0f}x)",
    }
