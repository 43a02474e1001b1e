"""What every benchmark shares: running the engine for N rounds, device peaks, and result files.

A benchmark module builds a :class:`Workload` (a spec plus the anchor it is compared with) and
calls :func:`run_engine`; :func:`report` turns the rounds into the JSON record and table row.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from fedweb_engine.models import flops_per_sample
from fedweb_engine.results.round_result import RoundResult
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec

RESULTS_ENV = "FEDWEB_BENCH_RESULTS"
DEFAULT_RESULTS = Path(__file__).resolve().parent / "results"
DATE = time.strftime("%Y-%m-%d")

# Dense peak TFLOP/s by precision, from the issue (H100/H200 SXM datasheets, without sparsity).
GPU_PEAKS = {"H100": {"bf16": 790.0, "fp16": 790.0, "fp32": 60.0}, "H200": {"bf16": 790.0, "fp16": 790.0, "fp32": 60.0}}


@dataclass(frozen=True)
class Options:
    """The command line: size, device and precision apply to every benchmark."""

    size: str = "small"  # small | full
    device: str = "auto"
    precision: str = "fp32"
    real: bool = False  # scheduling: run the small trace against a live FedWeb instead of simulating


@dataclass
class EngineRun:
    """Rounds measured after warm-up, plus the set-up time and the device the engine chose."""

    results: list[RoundResult]
    warmup: list[RoundResult]
    setup_seconds: float
    wall_seconds: float  # timed rounds only, host clock around them
    device_name: str
    device_type: str
    num_params: int
    flops_per_sample: int
    extra: dict[str, Any] = field(default_factory=dict)


def device_kind(device: str) -> str:
    """``cpu`` or ``cuda`` (for file names): ``auto`` resolves the way the engine does."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return "cuda" if device.startswith("cuda") else "cpu"


def results_dir() -> Path:
    """``$FEDWEB_BENCH_RESULTS`` when set (tests use a temp dir), else ``benchmarks/results``."""
    path = Path(os.environ.get(RESULTS_ENV) or DEFAULT_RESULTS)
    path.mkdir(parents=True, exist_ok=True)
    return path


def apply_options(spec: Spec, opts: Options, **compute: Any) -> Spec:
    return spec.replace(compute={"device": opts.device, "precision": opts.precision, **compute})


def run_engine(
    spec: Spec, *, warmup: int, desc: str, sim: Simulation | None = None, data_root: str | None = None
) -> EngineRun:
    """Build a Simulation (timed as set-up), run ``warmup`` rounds, then the rest of ``spec.rounds``.

    ``data_root`` is the folder ``data.path`` may lead into (the engine confines file datasets)."""
    t0 = time.perf_counter()
    sim = sim or Simulation(spec, data_root=data_root)
    setup = time.perf_counter() - t0
    flops = flops_per_sample(sim.model, tuple(sim.replicas[0].data.input_shape))
    done: list[RoundResult] = []
    bar = tqdm(total=spec.rounds, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True)
    t_timed = None
    while not sim.done:
        if len(done) == warmup:
            t_timed = time.perf_counter()
        r = sim.next_round()
        done.append(r)
        bar.update(1)
        bar.set_postfix(s_round=f"{r.round_seconds:.2f}", loss=f"{r.train_loss or 0:.3f}")
    bar.close()
    wall = time.perf_counter() - t_timed if t_timed is not None else 0.0
    run = EngineRun(
        results=done[warmup:],
        warmup=done[:warmup],
        setup_seconds=setup,
        wall_seconds=wall,
        device_name=sim.device_name,
        device_type=sim.device.type,
        num_params=sim.num_params,
        flops_per_sample=flops,
        extra={"cache_info": sim.cache_info()},
    )
    sim.close()
    return run


def peak_tflops(device_type: str, device_name: str, precision: str) -> tuple[float | None, str]:
    """The device's peak for ``precision`` and where the figure comes from.

    GPUs: the datasheet table above (None for an unknown GPU). CPU: measured here, the best of a
    few square matmuls in the training dtype; a rough ceiling, not a datasheet figure.
    """
    if device_type == "cuda":
        for key, peaks in GPU_PEAKS.items():
            if key in device_name:
                return peaks.get(precision), f"{key} datasheet (dense)"
        return None, "unknown GPU: no peak in benchmarks.common.GPU_PEAKS"
    return measure_cpu_matmul_tflops(precision), "measured on the spot: best 1024x1024 matmul"


def measure_cpu_matmul_tflops(precision: str = "fp32", n: int = 1024, repeats: int = 5) -> float:
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b  # warm-up: thread pool and kernel selection
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e12


def summarise(run: EngineRun, precision: str) -> dict[str, Any]:
    """The figures every benchmark reports, from the timed rounds."""
    rs = run.results
    train_s = sum(r.train_seconds for r in rs)
    round_s = sum(r.round_seconds for r in rs)
    samples = sum(r.samples for r in rs)
    achieved = run.flops_per_sample * samples / train_s / 1e12 if train_s else None
    peak, peak_source = peak_tflops(run.device_type, run.device_name, precision)
    vram = [r.vram_peak_mb for r in rs + run.warmup if r.vram_peak_mb is not None]
    return {
        "device": run.device_name,
        "precision": precision,
        "num_params": run.num_params,
        "flops_per_sample": run.flops_per_sample,
        "setup_seconds": run.setup_seconds,
        "warmup_rounds": len(run.warmup),
        "timed_rounds": len(rs),
        "wall_seconds": run.wall_seconds,
        "seconds_per_round": round_s / len(rs) if rs else None,
        "train_seconds_per_round": train_s / len(rs) if rs else None,
        "rounds_per_hour": 3600 * len(rs) / round_s if round_s else None,
        "samples": samples,
        "samples_per_s": samples / train_s if train_s else None,
        "clients_per_s": sum(r.completed for r in rs) / train_s if train_s else None,
        "achieved_tflops": achieved,
        "peak_tflops": peak,
        "peak_source": peak_source,
        "peak_fraction": achieved / peak if achieved is not None and peak else None,
        "peak_vram_mb": max(vram) if vram else None,
        "peak_rss_mb": max(r.rss_mb for r in rs + run.warmup),
        "process_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "final_test_accuracy": next((r.test_accuracy for r in reversed(rs) if r.test_accuracy is not None), None),
        "cache_info": run.extra.get("cache_info"),
    }


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: str = "cpu") -> dict[str, Any]:
    """Where a result was measured: every results file records it (CPU model, cores, torch, device)."""
    kind = device_kind(device)
    gpu = torch.cuda.get_device_name(0) if kind == "cuda" and torch.cuda.is_available() else None
    return {
        "cpu_model": cpu_model(),
        "cpu_cores": os.cpu_count(),
        "torch": torch.__version__,
        "device_name": gpu or "cpu",
        "host": platform.node(),
        "python": platform.python_version(),
    }


def stamp(command: str, device: str = "cpu") -> dict[str, Any]:
    """The provenance keys of a results file: the command, the date (UTC) and the machine."""
    return {"command": command, "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": machine(device)}


def write_result(name: str, opts: Options, record: dict[str, Any]) -> Path:
    """Write ``<name>-<size>-<devicekind>.json`` with the context needed to reproduce it."""
    command = f"python -m benchmarks {name} --size {opts.size} --device {opts.device} --precision {opts.precision}"
    record = {
        "benchmark": name,
        "size": opts.size,
        "device_kind": device_kind(opts.device),
        **stamp(command, opts.device),
        "host": platform.node(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        **record,
    }
    path = results_dir() / f"{name}-{opts.size}-{device_kind(opts.device)}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    return path


def table_row(record: dict[str, Any]) -> str:
    """One line of the summary table printed after each benchmark."""

    def fmt(key: str, spec: str = ".3g") -> str:
        value = record.get(key)
        return "-" if value is None else format(value, spec)

    return (
        f"| {record['benchmark']:<16} | {record['size']:<5} | {record['device']:<28} | {fmt('wall_seconds', '.1f'):>8} "
        f"| {fmt('seconds_per_round'):>8} | {fmt('rounds_per_hour', '.0f'):>9} | {fmt('samples_per_s', '.0f'):>9} "
        f"| {fmt('achieved_tflops'):>7} | {fmt('peak_fraction', '.2%'):>7} | {fmt('peak_vram_mb', '.0f'):>6} "
        f"| {fmt('peak_rss_mb', '.0f'):>6} | {record.get('anchor_summary', '-')} |"
    )


TABLE_HEADER = (
    "| benchmark        | size  | device                       |   wall s |  s/round |  rounds/h | samples/s "
    "| TFLOP/s |  %peak |  VRAM  |  RSS   | vs anchor |\n"
    "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
)


# Keys every result file carries (the test checks them); values may be null where they do not apply.
REQUIRED_KEYS = (
    "benchmark",
    "size",
    "device_kind",
    "date",
    "command",
    "device",
    "precision",
    "wall_seconds",
    "rounds_per_hour",
    "samples_per_s",
    "achieved_tflops",
    "peak_tflops",
    "peak_fraction",
    "peak_vram_mb",
    "peak_rss_mb",
    "anchor",
    "anchor_ratio",
    "anchor_summary",
)


def whole_run_seconds(
    run: EngineRun, summary: dict[str, Any], opts: Options, *, full_samples_per_round: float, full_rounds: int
) -> tuple[float | None, bool]:
    """(seconds for the whole full-size run, whether that figure is extrapolated).

    A full-size run counts set-up and every round, warm-up included (the anchors time the whole
    run); a small run's per-round time is scaled up with :func:`extrapolate_round_seconds`.
    """
    if opts.size == "full":
        return run.setup_seconds + sum(r.round_seconds for r in run.warmup + run.results), False
    per_round = extrapolate_round_seconds(summary, full_samples_per_round)
    return (per_round * full_rounds if per_round else None), True


def femnist_spec(*, num_clients: int, mean_samples: int, clients: int, rounds: int, eval_every: int) -> Spec:
    """FEMNIST-shaped writers (62 classes, natural partition) trained with the 2-conv CNN, batch 20."""
    return Spec.from_dict(
        {
            "rounds": rounds,
            "data": {
                "name": "synthetic_images",
                "options": {"num_classes": 62, "mean_samples": mean_samples},
                "num_clients": num_clients,
                "partition": "natural",
            },
            "model": {"name": "cnn"},
            "participation": {"clients_per_round": clients},
            "local": {"epochs": 1, "batch_size": 20, "lr": 0.05},
            "evaluation": {"every": eval_every},
        }
    )


def extrapolate_round_seconds(summary: dict[str, Any], full_samples_per_round: float) -> float | None:
    """Full-size seconds per round from a small run, scaled linearly by samples per round.

    Only an estimate: on a GPU small rounds are dominated by fixed per-step costs, so this
    over-estimates there; on a CPU the cost is close to linear in samples.
    """
    if not summary["timed_rounds"] or not summary["samples"]:
        return None
    samples_per_round = summary["samples"] / summary["timed_rounds"]
    return summary["seconds_per_round"] * full_samples_per_round / samples_per_round
