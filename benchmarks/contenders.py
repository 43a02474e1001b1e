"""Comparative benchmarks' plumbing: each contender in a fresh process, its own peak RSS, and spreads.

A contender's peak RSS is measured two ways, both its own (never ``ru_maxrss``, which a child
inherits from whatever process launched it):

- from outside: the launcher samples the child's RSS with psutil every ``SAMPLE_INTERVAL_S``
  (a lower bound: a peak between two samples is missed);
- from inside: the child resets its high-water mark (``/proc/self/clear_refs``, value ``5``) when
  it starts and reports ``VmHWM`` from ``/proc/self/status`` when it ends (exact, Linux only).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

SAMPLE_INTERVAL_S = 0.01


def reset_peak_rss() -> bool:
    """Reset this process's VmHWM to its current RSS (Linux); False where the kernel does not allow it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def own_peak_rss_mb() -> float | None:
    """This process's VmHWM in MB (since the last :func:`reset_peak_rss` or exec), None off Linux."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None


def run_contender(args: Sequence[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``args`` (a process printing one JSON line last); add ``sampled_peak_rss_mb`` from outside."""
    proc = subprocess.Popen(list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        try:
            p = psutil.Process(proc.pid)
            while not stop.wait(SAMPLE_INTERVAL_S):
                peak[0] = max(peak[0], p.memory_info().rss)
        except psutil.Error:  # the child has exited
            pass

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{err[-3000:]}")
    row = json.loads(out.strip().splitlines()[-1])
    return row | {"sampled_peak_rss_mb": peak[0] / 2**20}


def spread(values: Sequence[float]) -> dict[str, Any]:
    """min / median / max of one ratio over the repeats; ``crosses_1``: the spread includes 1.0."""
    lo, hi = min(values), max(values)
    return {
        "min": lo,
        "median": statistics.median(values),
        "max": hi,
        "values": list(values),
        "crosses_1": lo <= 1.0 <= hi,
    }


def describe(name: str, s: dict[str, Any]) -> str:
    """``engine/plain 1.23x (1.10-1.40)``, saying when the spread crosses 1.0."""
    text = f"{name} {s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})"
    return text + (": the spread crosses 1.0, no measurable difference" if s["crosses_1"] else "")


def dump(row: dict[str, Any]) -> None:
    """The child's last stdout line: its figures as JSON."""
    print(json.dumps(row), flush=True)
