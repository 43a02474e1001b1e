"""Per-client state on disk: resident memory and time per round vs population
(``python -m benchmarks client_state``).

A SCAFFOLD-like round gathers its cohort's rows (one float32 row of the model's width per client),
changes them, and scatters them back. Each contender runs the same rounds (same cohorts, groups of
``group`` clients as the trainer gathers them) in its own process, so its peak RSS is its own:

* ``store``: :class:`fedweb_engine.state.client_rows.ClientStateStore`, with its per-round journal
  and commit (what crash recovery needs);
* ``memmap``: a sparse ``np.memmap`` of [clients, width], indexed and assigned in place (the
  simple disk baseline, with no journal and no crash safety);
* ``resident``: a [clients, width] tensor in RAM (``torch.zeros``, as the engine's top-k residuals
  are kept today: every page is written, so the whole table is resident from the start), only
  where it fits in half the machine's available memory.

Per contender and population: RSS after each round and its slope (MB per round, over the rounds
after the first two), peak RSS, the median seconds per round (gather + scatter + commit), and the
bytes on disk at the end. The width is the 1.2M-parameter CNN's (1,206,590). The machine is shared
(2 cores, other sessions running): the load average is recorded with each run.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import torch

from benchmarks.common import Options
from fedweb_engine.state.client_rows import ClientStateStore

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 1_206_590  # the CNN on FEMNIST-shaped images (benchmarks/round_state.py)
POPULATIONS = (1_000, 10_000, 100_000)
SIZES = {"small": {"rounds": 10, "cohort": 100, "group": 25}, "full": {"rounds": 30, "cohort": 100, "group": 25}}
CONTENDERS = ("store", "memmap", "resident")


def measure(contender: str, num_clients: int, width: int, rounds: int, cohort: int, group: int, folder: Path) -> dict:
    """One contender over ``rounds`` rounds, in this process (the benchmark runs it in a child)."""
    process = psutil.Process()
    rss_start = process.memory_info().rss
    cpu = torch.device("cpu")
    if contender == "store":
        store = ClientStateStore(folder, num_clients, width)
        gather, scatter = (lambda ids: store.gather(ids, cpu)), store.scatter
        commit, disk = store.commit, store.disk_bytes
    elif contender == "memmap":
        path = folder / "rows.f32"
        rows = np.memmap(path, dtype=np.float32, mode="w+", shape=(num_clients, width))

        def gather(ids):
            return torch.from_numpy(rows[ids.numpy()])

        def scatter(ids, new):
            rows[ids.numpy()] = new.numpy()

        commit, disk = (lambda r: None), (lambda: path.stat().st_blocks * 512)
    else:
        table = torch.zeros(num_clients, width)
        gather, scatter = (lambda ids: table.index_select(0, ids)), (lambda ids, new: table.index_copy_(0, ids, new))
        commit, disk = (lambda r: None), (lambda: 0)
    rng = np.random.default_rng(0)
    seconds, rss = [], []
    for r in range(1, rounds + 1):
        ids = torch.from_numpy(np.sort(rng.choice(num_clients, cohort, replace=False)))
        t0 = time.perf_counter()
        for part in ids.split(group):
            scatter(part, gather(part) + 1.0)  # the algorithm's new row for each client
        commit(r)
        seconds.append(time.perf_counter() - t0)
        rss.append(process.memory_info().rss / 2**20)
    tail = np.arange(2, rounds)
    return {
        "contender": contender,
        "num_clients": num_clients,
        "resident_if_dense_gb": num_clients * width * 4 / 1e9,
        "rss_start_mb": rss_start / 2**20,
        "rss_mb": [round(x, 1) for x in rss],
        "rss_slope_mb_per_round": float(np.polyfit(tail, np.asarray(rss)[tail], 1)[0]),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "round_s_median": statistics.median(seconds),
        "round_s": [round(s, 3) for s in seconds],
        "disk_bytes": disk(),
        "load_average_1min": os.getloadavg()[0],
    }


def _in_child(contender: str, num_clients: int, size: dict, base: Path) -> dict:
    available = psutil.virtual_memory().available
    if contender == "resident" and num_clients * WIDTH * 4 > available / 2:
        return {
            "contender": contender,
            "num_clients": num_clients,
            "resident_if_dense_gb": num_clients * WIDTH * 4 / 1e9,
            "skipped": f"{num_clients * WIDTH * 4 / 1e9:.0f} GB does not fit in half of {available / 1e9:.0f} GB",
        }
    folder = Path(tempfile.mkdtemp(dir=base, prefix=f"bench-client-state-{contender}-"))
    try:
        args = [contender, num_clients, WIDTH, size["rounds"], size["cohort"], size["group"], folder]
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.client_state", *map(str, args)],
            check=True, capture_output=True, text=True, cwd=ROOT,
        )  # fmt: skip
        return json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run(opts: Options) -> dict[str, Any]:
    size = SIZES[opts.size]
    base = Path(os.environ.get("FEDWEB_DATA_DIR") or ROOT / "var")  # the file system workers write to
    base.mkdir(parents=True, exist_ok=True)
    rows = [_in_child(c, n, size, base) for n in POPULATIONS for c in CONTENDERS]
    by = {(r["contender"], r["num_clients"]): r for r in rows}
    ratios = {}
    for n in POPULATIONS:
        store, memmap = by[("store", n)], by[("memmap", n)]
        ratios[str(n)] = {
            "store_over_memmap_round_s": store["round_s_median"] / memmap["round_s_median"],
            "store_rss_growth_mb": store["rss_mb"][-1] - store["rss_mb"][1],
            "memmap_rss_growth_mb": memmap["rss_mb"][-1] - memmap["rss_mb"][1],
            "resident_rss_growth_mb": (
                by[("resident", n)]["rss_mb"][-1] - by[("resident", n)]["rss_mb"][1] if "rss_mb" in by[("resident", n)] else None
            ),
        }  # fmt: skip
    summary = "; ".join(
        f"{n // 1000}k clients: store {by[('store', n)]['rss_slope_mb_per_round']:+.1f} MB/round "
        f"(memmap {by[('memmap', n)]['rss_slope_mb_per_round']:+.0f}), "
        f"{by[('store', n)]['round_s_median']:.2f} s/round ({ratios[str(n)]['store_over_memmap_round_s']:.2f}x memmap)"
        for n in POPULATIONS
    )
    return {
        "device": "cpu",
        "precision": "fp32",
        "width": WIDTH,
        **size,
        "populations": list(POPULATIONS),
        "results": rows,
        "ratios": ratios,
        "peak_rss_mb": max(r.get("peak_rss_mb", 0) for r in rows if r["contender"] == "store"),
        "seconds_per_round": max(r["round_s_median"] for r in rows if r["contender"] == "store"),
        "cpu_count": os.cpu_count(),
        "machine_note": "shared 2-core VM with other sessions' tests running; load averages per run in results",
        "anchor_summary": summary,
    }


if __name__ == "__main__":  # one contender, in a child process of run()
    contender, n, width, rounds, cohort, group, folder = sys.argv[1:]
    record = measure(contender, int(n), int(width), int(rounds), int(cohort), int(group), Path(folder))
    print(json.dumps(record))
