"""``python -m benchmarks.shards [--workers 1,2,4] [--rounds 4]``: one experiment sharded over worker processes.

Each "worker" is a separate process with one CPU thread (as Celery workers run, OMP_NUM_THREADS=1)
doing exactly what a shard task does: bring its cached simulation to the round's published
checkpoint, plan the round, train its shard, write the partial-sum file. The parent concludes
each round as the last shard would (read the partials, step the server, publish the checkpoint).
The broker and database hops of the real tasks (milliseconds) are not included. Reports seconds
per round for the unsharded engine, then for 1, 2, 4 shards on as many workers: the speedup, and
the overhead of sharding (1 shard against the unsharded round). Writes
``benchmarks/results/shards-cpu.json``. Speedups are bounded by the machine's free cores.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import tempfile
import time
from pathlib import Path

import torch

from workers.engine import shards
from workers.engine.checkpoint import read_checkpoint
from workers.engine.runner import Simulation
from workers.engine.spec import Spec

# Compute-heavy clients: a wide MLP on 28x28 inputs, 5 local epochs, trained one client at a time.
SPEC = {
    "seed": 1, "rounds": 50,
    "data": {"dataset": "digits", "num_clients": 64, "image_size": 28},
    "model": {"name": "mlp", "hidden": 512},
    "participation": {"clients_per_round": 16},
    "local": {"epochs": 5, "batch_size": 10},
    "compute": {"device": "cpu", "client_group_size": 4, "training": "sequential"},
}  # fmt: skip

_sim: Simulation | None = None  # one per worker process, as in a worker's cache


def _shard(args: tuple[dict, str, int, int, str]) -> float:
    """A shard task: catch up to the published checkpoint, plan, train, write the partial."""
    global _sim
    spec, published, n, index, out = args
    if _sim is None:
        _sim = Simulation(Spec.from_dict(spec))
    if Path(published).exists():
        _sim.load_state_dict(*read_checkpoint(published))
    t = time.perf_counter()
    planned = shards.plan_round(_sim, n)
    shards.write_partial(out, shards.train_shard(_sim, planned, index))
    return time.perf_counter() - t


def _init() -> None:
    torch.set_num_threads(1)


def sharded_seconds(spec: dict, n: int, rounds: int, folder: Path) -> float:
    """Mean seconds per round (after a warm-up round) with ``n`` shards on ``n`` worker processes."""
    torch.set_num_threads(1)
    lead = Simulation(Spec.from_dict(spec))
    published = folder / f"published-{n}.safetensors"
    times = []
    with mp.get_context("spawn").Pool(n, initializer=_init) as pool:
        for r in range(rounds + 1):
            t0 = time.perf_counter()
            outs = [str(folder / f"shard-{n}-{k}.safetensors") for k in range(n)]
            pool.map(_shard, [(spec, str(published), n, k, outs[k]) for k in range(n)], chunksize=1)
            planned = shards.plan_round(lead, n)
            shards.conclude_round(lead, planned, [shards.read_partial(p) for p in outs], t0=t0)
            lead.save_checkpoint(published)
            if r:  # round 0 warms the workers up (building data and models)
                times.append(time.perf_counter() - t0)
    return sum(times) / len(times)


def unsharded_seconds(spec: dict, rounds: int) -> float:
    torch.set_num_threads(1)
    sim = Simulation(Spec.from_dict(spec))
    sim.next_round()
    t0 = time.perf_counter()
    for _ in range(rounds):
        sim.next_round()
    return (time.perf_counter() - t0) / rounds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.shards", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    base = unsharded_seconds(SPEC, args.rounds)
    rows = {"unsharded": base}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            rows[f"{n} shards"] = sharded_seconds(SPEC, n, args.rounds, Path(tmp))
    record = {
        "cpus": os.cpu_count(),
        "spec": SPEC,
        "seconds_per_round": rows,
        "speedup": {k: base / v for k, v in rows.items()},
        "overhead_seconds_per_round": rows.get("1 shards", base) - base,
    }
    print(f"{'run':<12} {'s/round':>8} {'speedup':>8}   ({os.cpu_count()} CPUs)")
    for k, v in rows.items():
        print(f"{k:<12} {v:8.3f} {base / v:7.2f}x")
    print(f"sharding overhead per round (1 shard vs unsharded): {record['overhead_seconds_per_round']:.3f} s")
    out = Path(os.environ.get("FEDWEB_BENCH_RESULTS", Path(__file__).parent / "results")) / "shards-cpu.json"
    out.write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
