"""Searches that stop losing configurations early (issue 31): ``python -m benchmarks search``.

On the algorithms benchmark's workloads (``benchmarks.algorithms``: digits on 2-class shards, 50
clients, and Synthetic(1, 1), 30 clients; a logistic model, 10 clients a round, E = 2, B = 20), a
sweep of 12 configurations (client lr 0.01 / 0.05 / 0.2 x client algorithm FedAvg / FedProx /
SCAFFOLD / FedDyn) x 2 seeds over R rounds is run three ways:

- **grid**: every configuration, every seed, every round;
- **asha**: successive halving, rungs at R/9 and R/3 rounds (η = 3), the top 1/3 of a rung continues;
- **median**: median stopping from round R/9 on, every R/9 rounds.

``--size small``: R = 27 (rungs at 3 and 9); ``--size full``: R = 81 (rungs at 9 and 27).

Every way is a real FedWeb sweep (its own SQLite database) whose rounds run through the round task's
own function (``workers.rounds.execute_round``: claim, train, publish the round state, record, and
the search's decision at the boundary), one round at a time in the fifo policy's order, in one
process with one torch thread: a stopped run is paused and a promoted one loads its round state, as on
a worker. Decisions use each configuration's mean over its seeds of its last 3 evaluated test
accuracies. A configuration's **final accuracy** is the mean over its seeds of its test accuracy at
round R; the grid's best is the reference. A way **picks** the configuration with the best search
value among those it trained in full.

Reported per dataset and way: rounds trained (and their ratio to the grid's), wall and CPU seconds,
the configuration picked, its final accuracy and its gap to the grid's best in points, and the
largest difference between a round of a search's run and the same round of the grid's (0: pausing
and resuming changed nothing). The goal (issue 31): ASHA trains <= 1/3 of the grid's rounds and picks
a configuration within 0.5 points of the grid's best on both datasets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import Options

ROOT = Path(__file__).resolve().parents[1]
# The first rung at R / eta^2 rounds: ASHA's rungs at R/9 and R/3, then the full length.
SIZES = {
    "small": {"seeds": [0, 1], "rounds": 27, "first_rung": 3},
    "full": {"seeds": [0, 1], "rounds": 81, "first_rung": 9},
}
LRS = [0.01, 0.05, 0.2]
CLIENTS = ["fedavg", "fedprox", "scaffold", "feddyn"]  # their options at their defaults: mu = alpha = 0.01
ETA, LAST_K = 3, 3


def ways(first_rung: int) -> dict[str, tuple[str, dict | None]]:
    return {
        "grid": ("none", None),
        "asha": ("asha", {"first_rung": first_rung, "eta": ETA, "last_k": LAST_K}),
        "median": ("median", {"first_rung": first_rung, "last_k": LAST_K}),
    }


DATA = {
    "digits": {"name": "digits", "num_clients": 50},
    "synthetic": {"name": "synthetic", "options": {"alpha": 1.0, "beta": 1.0}, "num_clients": 30},
}
GOAL_ROUNDS, GOAL_POINTS = 1 / 3, 0.5


def base_spec(dataset: str, rounds: int) -> dict[str, Any]:
    """The algorithms benchmark's workload as a sweep's base spec."""
    return {
        "seed": 0, "rounds": rounds,
        "data": {**DATA[dataset], "partition": "shards", "shards_per_client": 2},
        "model": {"name": "logistic"}, "algorithm": {"name": "fedavg"},
        "participation": {"clients_per_round": 10}, "local": {"epochs": 2, "batch_size": 20, "lr": 0.05},
        "compute": {"device": "cpu"},
    }  # fmt: skip


def run(opts: Options) -> dict[str, Any]:
    """A throwaway FedWeb database and data folder; the driver below runs every way in it."""
    folder = Path(tempfile.mkdtemp(prefix="fedweb-search-"))
    env = {
        **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
        "DJANGO_SETTINGS_MODULE": "fedweb.settings", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
        "DATABASE_URL": f"sqlite:///{folder / 'db.sqlite3'}", "FEDWEB_DATA_DIR": str(folder / "data"),
        "CHECKPOINT_EVERY": str(SIZES[opts.size]["rounds"]),  # a full checkpoint at the end only, as a long run
    }  # fmt: skip
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        payload = json.dumps(SIZES[opts.size])
        proc = subprocess.run([sys.executable, "-m", "benchmarks.search"], cwd=ROOT, env=env, input=payload,
                              capture_output=True, text=True, check=False)  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"the search driver failed:\n{proc.stderr[-4000:]}")
        table = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return record(table, SIZES[opts.size])


def record(table: dict[str, Any], size: dict[str, Any]) -> dict[str, Any]:
    asha = [table[d]["ways"]["asha"] for d in DATA]
    met = all(w["rounds_ratio"] <= GOAL_ROUNDS and w["gap_points"] <= GOAL_POINTS for w in asha)
    wall = sum(w["wall_seconds"] for d in DATA for w in table[d]["ways"].values())
    summary = "; ".join(
        f"{d}: asha {table[d]['ways']['asha']['rounds_ratio']:.2f}x rounds, "
        f"gap {table[d]['ways']['asha']['gap_points']:.2f} pt; median {table[d]['ways']['median']['rounds_ratio']:.2f}x, "
        f"gap {table[d]['ways']['median']['gap_points']:.2f} pt"
        for d in DATA
    )
    return {
        "device": "cpu", "precision": "fp32", "wall_seconds": wall, "rounds_per_hour": None, "samples_per_s": None,
        "achieved_tflops": None, "peak_tflops": None, "peak_fraction": None, "peak_vram_mb": None,
        "peak_rss_mb": None, "anchor": "the full grid (rounds trained; its best configuration's final accuracy)",
        "anchor_ratio": max(w["rounds_ratio"] for w in asha), "anchor_summary": summary,
        "goal": f"ASHA <= {GOAL_ROUNDS:.3f} of the grid's rounds and within {GOAL_POINTS} points of its best, "
                "on both datasets", "goal_met": met,
        "seeds": size["seeds"], "settings": {**size, "lrs": LRS, "clients": CLIENTS, "ways": ways(size["first_rung"]),
                                             "data": DATA, "base": base_spec("digits", size["rounds"])},
        "note": "one in-process worker, one torch thread, on a shared 2-core machine: wall times include "
                "its load; CPU seconds are the driver's own",
        "results": table,
    }  # fmt: skip


# -- the driver, in its own process with Django set up on the throwaway database -----------------


def drive(payload: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.fleet import bench_user, setup_django

    setup_django()
    from django.conf import settings

    # No socket listens: events go to an in-process layer rather than to a Redis that may be away.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    import torch

    torch.set_num_threads(1)
    from benchmarks import search_ways

    owner = bench_user("search")
    rounds, plan = payload["rounds"], ways(payload["first_rung"])
    return {dataset: search_ways.compare(owner, dataset, base_spec(dataset, rounds), payload["seeds"], plan)
            for dataset in DATA}  # fmt: skip


if __name__ == "__main__":
    started = time.perf_counter()
    out = drive(json.load(sys.stdin))
    print(f"search driver: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(json.dumps(out), flush=True)
