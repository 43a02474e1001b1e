"""What publishing the round state costs per round (``python -m benchmarks round_state``).

After every round a worker writes the experiment's round state (``compact_state``:
global model, codec/strategy buffers, RNG, participation counts) so that any
worker runs the next round by loading it (workers/round_state.py). This measures, for the
1.2M-parameter CNN on FEMNIST-shaped images and the 14M-parameter language model:

* ``write_fsync_s`` / ``write_s``: writing the file atomically with and without fsync;
* ``load_s``: reading it and loading it into a simulation this worker holds (a switch back);
* ``switch_s``: a switch on a worker that does not hold the experiment but has its data cached
  (build the simulation on the cached data, then load the state);
* ``bytes``: the file's size; ``round_s``: one round of the workload, for scale.

Each is the median of ``repeats`` (>= 3) runs, in a folder under ``$FEDWEB_DATA_DIR`` (default
``var/``), the file system the workers write to (``/tmp`` may be memory, where fsync is free).
Workers publish without fsync: a killed process leaves whole files (the page cache survives it)
and a torn file after a power cut is refused on load and replayed from the state before it, so
the flush would buy nothing the crash path does not already give.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.common import Options, device_kind
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec
from fedweb_engine.state.checkpoint import read_checkpoint, write_checkpoint
from fedweb_engine.state.round_state import compact_state, complete_state

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS: dict[str, dict[str, Any]] = {
    "femnist_cnn": {  # FEMNIST-shaped: 1x28x28, 62 classes -> 1,206,590 parameters
        "rounds": 100,
        "data": {
            "name": "synthetic_images",
            "options": {"num_classes": 62, "mean_samples": 40},
            "num_clients": 20,
            "partition": "natural",
        },
        "model": {"name": "cnn"},
        "participation": {"clients_per_round": 10},
        "local": {"epochs": 1, "batch_size": 20, "lr": 0.05},
    },  # fmt: skip
    "tokens_lm14m": {  # the 14M-parameter language model (pythia-14m-sized)
        "rounds": 100,
        "data": {
            "name": "tokens",
            "options": {"mean_samples": 8, "seq_len": 32},
            "num_clients": 4,
            "partition": "natural",
        },
        "model": {"name": "lm14m"},
        "participation": {"clients_per_round": 2},
        "local": {"epochs": 1, "batch_size": 4, "lr": 0.01},
        "evaluation": {"batch_size": 8},
    },  # fmt: skip
}


def _median(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _load(sim: Simulation, path: Path) -> None:
    tensors, meta = read_checkpoint(path)
    sim.load_state_dict(complete_state(tensors), meta)


def measure(name: str, device: str, repeats: int) -> dict[str, Any]:
    spec = Spec.from_dict({**WORKLOADS[name], "compute": {"device": device}})
    sim = Simulation(spec)
    sim.next_round()  # warm-up: buffers touched, strategy state present
    t0 = time.perf_counter()
    sim.next_round()
    round_s = time.perf_counter() - t0
    base = Path(os.environ.get("FEDWEB_DATA_DIR") or ROOT / "var")
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix="bench-round-state-") as folder:
        path = Path(folder) / "state-000002.safetensors"
        tensors, meta = compact_state(sim)  # what workers publish
        write_fsync_s = _median(lambda: write_checkpoint(path, tensors, meta, fsync=True), repeats)
        write_s = _median(lambda: write_checkpoint(path, tensors, meta, fsync=False), repeats)
        size = path.stat().st_size
        held = Simulation(spec)
        load_s = _median(lambda: _load(held, path), repeats)
        switch_s = _median(lambda: _load(Simulation(spec), path), repeats)
    return {
        "model": name,
        "num_params": sim.num_params,
        "bytes": size,
        "round_s": round_s,
        "write_fsync_s": write_fsync_s,
        "write_s": write_s,
        "load_s": load_s,
        "switch_s": switch_s,
        "write_share_of_round": write_s / round_s,
        "repeats": repeats,
    }


def run(opts: Options) -> dict[str, Any]:
    device = "cpu" if opts.device == "auto" else opts.device
    repeats = 3 if opts.size == "small" else 7
    rows = [measure(name, device, repeats) for name in WORKLOADS]
    summary = ", ".join(
        f"{r['model']}: {r['bytes'] / 1e6:.1f} MB, write {r['write_s'] * 1e3:.0f} ms "
        f"(fsync {r['write_fsync_s'] * 1e3:.0f} ms), load {r['load_s'] * 1e3:.0f} ms, round {r['round_s']:.2f} s"
        for r in rows
    )
    return {
        "device": device if device_kind(device) == "cpu" else torch.cuda.get_device_name(),
        "precision": "fp32",
        "workloads": WORKLOADS,
        "models": rows,
        "cpu_count": os.cpu_count(),
        "anchor_summary": summary,
    }
