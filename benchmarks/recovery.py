"""``python -m benchmarks recovery [--size small|full]``: what a ``kill -9`` of a busy worker costs.

The duration the crash tests used to assert on, measured here instead (tests check behaviour). A
fresh local FedWeb (``benchmarks.fleet.LocalFleet``) with one more worker than kills, and one slow
experiment (rounds of about a second). Each repeat waits until a worker holds a round, kills that
worker's whole process group, and measures from the kill until the round is recorded by another
worker: the rest of the lease (``WORKER_LOST_AFTER`` after its last renewal), the next heartbeat of a
live worker that re-sends it, and the round itself, rebuilt from the last checkpoint. The record
splits that into the lease's remainder at the kill and the rest.

``--size full``: the defaults (``HEARTBEAT_INTERVAL=5``, ``WORKER_LOST_AFTER=60``), 3 kills.
``--size small``: ``1`` / ``5``, 1 kill (a check of the path). Not part of ``all`` (needs a Redis).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
from typing import Any

from benchmarks.common import Options
from benchmarks.contenders import spread
from benchmarks.fleet import LocalFleet, bench_user, start_driver

SIZES = {
    "full": {"kills": 3, "HEARTBEAT_INTERVAL": "5", "WORKER_LOST_AFTER": "60"},
    "small": {"kills": 1, "HEARTBEAT_INTERVAL": "1", "WORKER_LOST_AFTER": "5"},
}
SPEC = {
    "seed": 3, "rounds": 200,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8},
    "model": {"name": "mlp", "hidden": 32},
    "participation": {"clients_per_round": 4},
    "local": {"epochs": 60},
    "compute": {"device": "cpu"},
}  # fmt: skip
WAIT_S = 600.0


def run(opts: Options) -> dict[str, Any]:
    size = SIZES[opts.size]
    env = {k: v for k, v in size.items() if k != "kills"}
    t0 = time.time()
    with LocalFleet(size["kills"] + 1, env) as fleet:
        out = fleet.drive("benchmarks.recovery", {"kills": size["kills"]}, timeout=WAIT_S * (size["kills"] + 1))
    seconds = [k["recovery_s"] for k in out["kills"]]
    s = spread(seconds)
    return {
        "command": f"python -m benchmarks recovery --size {opts.size}",
        "device": "local CPU workers",
        "precision": "fp32",
        "settings": env,
        "wall_seconds": time.time() - t0,
        "kills": out["kills"],
        "recovery_s": s,
        "seconds_per_round": statistics.median(k["round_seconds"] for k in out["kills"]),
        "anchor": f"README: a kill -9 costs at most WORKER_LOST_AFTER + HEARTBEAT_INTERVAL + a round ({env})",
        "anchor_ratio": None,
        "anchor_summary": f"kill -9 to the round recorded by another worker: median {s['median']:.1f} s "
        f"({s['min']:.1f}-{s['max']:.1f}) over {len(seconds)} kills",
    }


def drive(payload: dict[str, Any]) -> dict[str, Any]:
    """In the fleet's environment: kill the worker holding a round, ``kills`` times; time each recovery."""
    start_driver(payload)
    from django.utils import timezone

    from orchestrator.experiments.launch import create_experiment
    from orchestrator.experiments.models import Experiment

    e = create_experiment(owner=bench_user("recovery"), name="recovery", spec=SPEC, start=False)
    e.start()
    pids = {f"bench{i}": pid for i, pid in enumerate(payload["worker_pids"])}
    kills = []
    for _ in range(payload["kills"]):
        deadline = time.monotonic() + WAIT_S
        while True:  # a round in flight, claimed by a live worker, not in its first second
            e.refresh_from_db()
            if e.round_in_flight() and e.worker.split("@")[0] in pids and e.current_round >= 1:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no round in flight: status {e.status}, round {e.current_round}")
            time.sleep(0.05)
        held, name = e.claimed_round, e.worker.split("@")[0]
        os.killpg(pids.pop(name), signal.SIGKILL)
        killed = timezone.now()
        lease_left = (e.lease_expires - killed).total_seconds()
        while not e.rounds.filter(round=held).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"round {held} not recorded after the kill of {name}")
            time.sleep(0.05)
        r = e.rounds.get(round=held)
        kills.append({
            "killed_worker": name, "round": held, "taken_over_by": r.worker.split("@")[0],
            "recovery_s": (r.recorded - killed).total_seconds(), "lease_left_s": lease_left,
            "round_seconds": r.round_seconds,
        })  # fmt: skip
    Experiment.objects.filter(pk=e.pk).update(status="cancelled")
    return {"kills": kills}


if __name__ == "__main__":
    print(json.dumps(drive(json.load(sys.stdin))), flush=True)
