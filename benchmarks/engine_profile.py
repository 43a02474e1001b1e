"""Where a round's time goes, the eager engine vs the compacted vmap loop, on engine_overhead's workload.

    python -m benchmarks.engine_profile [--rounds 8] [--algorithm fedavg] [--label after] [--out FILE]

One process, one CPU thread: a warm-up round, then ``--rounds`` rounds of each contender under
``torch.profiler`` (operator self-times) and ``cProfile`` (the engine's Python parts: planning,
training, the uplink codec, the round's conclusion). It also counts, from the engine's own plans,
the client rows a step computes against the rows that have a batch (power-of-two windows compute
idle clients), the layouts of the ``bmm`` operands each side runs, and the time of a ``bmm`` in each
layout (``bmm_orientation``). ``top_ops``' self times are the profiler's, time on the thread while the op ran:
on a loaded machine they include time the thread waited for a core (``cpu_ms_per_step`` does not).
The record is appended to ``--out`` under ``--label`` (run it on an older checkout
with ``PYTHONPATH`` pointing there to record a "before"). Times under load are noisy; operator
counts and row counts are exact.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results" / "engine_overhead_profile-full-cpu.json"
# The engine's parts, by the function whose cumulative time is that part's.
PARTS = {
    "planning": ("plan.py", "plan_groups"),
    "training (local steps)": ("client.py", "train"),
    "uplink codec": ("training.py", "_uplink"),
    "aggregation": ("aggregate.py", "accumulate_"),
    "round conclusion (server step, metrics)": ("runner.py", "conclude_round"),
    "broadcast": ("runner.py", "_broadcast"),
    "client state gather": ("client_state.py", "gather"),
    "client state scatter": ("client_state.py", "scatter"),
}


def _ops(prof, steps: int, top: int = 15) -> list[dict[str, Any]]:
    rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:top]
    return [
        {
            "op": e.key,
            "calls_per_step": e.count / steps,
            "self_ms_per_step": e.self_cpu_time_total / 1e3 / steps,
        }  # the op's own time on the thread
        for e in rows
    ]


def _rows(spec) -> dict[str, float]:
    """Client rows computed per step (the engine's windows) against rows with a batch."""
    from fedweb_engine.simulation.runner import Simulation
    from fedweb_engine.training.plan import plan_groups
    from fedweb_engine.training.vectorise import active_windows

    sim = Simulation(spec)
    computed = active = steps = 0
    trainer = sim.replicas[0].trainer
    bucketed = getattr(trainer, "compile", False) or trainer.device.type != "cpu"
    for r in range(spec.rounds):
        sim.round = r
        cohort = sim.sample_cohort(sim.rng)
        for plan in plan_groups(sim.rng, cohort, sim.offsets, group_size=spec.compute.client_group_size,
                                epochs=spec.local.epochs, batch_size=spec.local.batch_size):  # fmt: skip
            try:
                windows = active_windows(plan.active, bucketed=bucketed)
            except TypeError:  # before exact windows: always power-of-two
                windows = active_windows(plan.active)
            computed += sum(w[1] - w[0] for w in windows)
            active += int(plan.active.sum())
            steps += len(windows)
    return {"rows_computed": computed, "rows_with_a_batch": active, "ratio": computed / active, "steps": steps}


def bmm_operands(step, rounds: int = 1, top: int = 4) -> list[dict[str, Any]]:
    """The most frequent operand layouts of ``aten.bmm`` over ``rounds`` rounds of ``step``: shape,
    strides and calls of each operand pair (what sends MKL to one kernel or another)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: dict[tuple, int] = {}

    class Layouts(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.bmm.default:
                key = tuple((tuple(a.shape), a.stride()) for a in args[:2])
                seen[key] = seen.get(key, 0) + 1
            return func(*args, **(kwargs or {}))

    with Layouts():
        for _ in range(rounds):
            step()
    rows = sorted(seen.items(), key=lambda kv: -kv[1])[:top]
    return [
        {"a": {"shape": a[0], "stride": a[1]}, "b": {"shape": b[0], "stride": b[1]}, "calls": n} for (a, b), n in rows
    ]


def bmm_orientation(n: int = 64, batch: int = 20, features: int = 784, classes: int = 10) -> dict[str, float]:
    """Milliseconds per ``bmm`` (the best of 7 × 100 calls, CPU time) for ``n`` clients of the
    784->10 model: the forward with the flat buffer's row stride (P) and with a contiguous weight;
    the weight's gradient as autograd's ``bmm`` rule computes it (``xᵀ·g``, [n, in, out]) and as
    ``grad`` under ``vmap`` does for a row-major weight (``gᵀ·x``, [n, out, in])."""
    import torch

    P = features * classes + classes
    x, g = torch.randn(n, batch, features), torch.randn(n, batch, classes)
    strided = torch.randn(n, P)[:, : features * classes].view(n, classes, features)
    dense = strided.contiguous()

    def best(f) -> float:
        for _ in range(10):
            f()
        times = []
        for _ in range(7):
            t = time.process_time()
            for _ in range(100):
                f()
            times.append((time.process_time() - t) / 100 * 1e3)
        return min(times)

    return {
        "clients": n,
        "forward_flat_rows_ms": best(lambda: torch.bmm(x, strided.transpose(1, 2))),
        "forward_contiguous_ms": best(lambda: torch.bmm(x, dense.transpose(1, 2))),
        "weight_grad_xT_g_ms": best(lambda: torch.bmm(x.transpose(1, 2), g)),
        "weight_grad_gT_x_ms": best(lambda: torch.bmm(g.transpose(1, 2), x)),
    }


def profile(rounds: int, algorithm: str) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from benchmarks.engine_overhead import workload
    from benchmarks.plain_vmap import VmapFedAvg
    from fedweb_engine.data import build_data
    from fedweb_engine.simulation.runner import Simulation

    torch.set_num_threads(1)
    spec = workload("full", "cpu", algorithm, "off").replace(rounds=rounds + 2)  # the eager engine's steps
    out: dict[str, Any] = {"rows": _rows(spec.replace(rounds=rounds)), "bmm_orientation": bmm_orientation()}
    sim = Simulation(spec)
    loop = VmapFedAvg(spec, build_data(spec.data, spec.seed), torch.device("cpu"))
    for name, step in (("engine", sim.next_round), ("vmap_loop", loop.next_round)):
        step()  # warm-up
        calls = cProfile.Profile()
        t0, c0 = time.perf_counter(), time.process_time()
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            calls.enable()
            results = [step() for _ in range(rounds)]
            calls.disable()
        cpu = time.process_time() - c0
        steps = sum(e.count for e in prof.key_averages() if e.key == "aten::bmm") // 2 or 1  # forward + backward
        clients = sum(getattr(r, "clients", None) or r.participants for r in results)
        row = {
            "bmm_operands": bmm_operands(step),  # one more round, outside the timed ones
            "clients": clients,
            "steps": steps,
            "wall_s": time.perf_counter() - t0,
            "cpu_s": cpu,
            "cpu_ms_per_step": 1e3 * cpu / steps,
            "ops_per_step": sum(e.count for e in prof.key_averages()) / steps,
            "top_ops": _ops(prof, steps),
        }
        if name == "engine":
            stats = pstats.Stats(calls).stats
            row["parts_wall_s"] = {  # cProfile's clock: wall time, waits for a core included
                part: sum(v[3] for (f, _, fn), v in stats.items() if f.endswith(file) and fn == func)
                for part, (file, func) in PARTS.items()
            }
        out[name] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--algorithm", default="fedavg")
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", type=Path, default=OUT)
    a = parser.parse_args()
    record = json.loads(a.out.read_text()) if a.out.is_file() else {
        "benchmark": "engine_overhead_profile",
        "command": "python -m benchmarks.engine_profile --rounds R --algorithm A --label L",
        "note": "one process, one thread; times are noisy on a loaded machine (top_ops' self times include waits "
        "for a core; cpu_ms_per_step is the process's CPU time), operator and row counts are exact",
    }  # fmt: skip
    key = f"{a.label}:{a.algorithm}"
    record[key] = profile(a.rounds, a.algorithm) | {"load_average": list(os.getloadavg()), "rounds": a.rounds}
    a.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record[key].items() if k != "engine" and k != "vmap_loop"}, indent=2))


if __name__ == "__main__":
    main()
