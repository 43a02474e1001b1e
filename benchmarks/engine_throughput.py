"""Engine vs a plain sequential PyTorch FedAvg loop on the same workload, in one process.

Issue 2, acceptance 9: ``python benchmarks/engine_throughput.py [--rounds N] [--device D]`` runs the
quickstart preset with the engine and with :class:`benchmarks.plain.PlainFedAvg`, round for round
interleaved (so both see the same load on a shared machine), prints clients/s for both and their
ratio, and writes ``benchmarks/results/engine_throughput-<training>-<cpu|cuda>.json``
(``$FEDWEB_BENCH_RESULTS`` overrides the folder). :func:`compare` is also what ``python -m benchmarks
vs_plain`` uses.

Both sides are timed over the same span: one whole round, wall clock around ``next_round()`` (for the
engine: cohort sampling and planning, the broadcast, training, uplink codec, aggregation and server
step; for the plain loop: sampling, ``load_state_dict`` per client, training and averaging). No timed
round evaluates: the test accuracy of both is measured after the timed rounds. Every timed round is a
repeat: the record gives the min / median / max of the per-round ratio.

Why this baseline: on a CPU the engine trains CNN clients one at a time (``compute.training: auto``),
so the loop a user writes by hand (``benchmarks/plain.py``: a reused model, a fresh optimizer per
client, ``state_dict`` averaging) is the strongest simple alternative; vectorising convolutions with
``vmap`` is slower on a CPU (the ``--training vectorized`` run shows it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `workers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from tqdm import tqdm

from benchmarks.common import device_kind, results_dir, stamp
from benchmarks.contenders import spread
from benchmarks.plain import PlainFedAvg
from fedweb_engine.data import build_data
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.presets import preset_spec
from fedweb_engine.spec.schema import Spec


def compare(spec: Spec, *, rounds: int, warmup: int = 1, desc: str = "engine vs plain") -> dict[str, Any]:
    """Run ``warmup + rounds`` rounds of each, interleaved; return clients/s, samples/s and ratios."""
    spec = spec.replace(rounds=warmup + rounds + 1)  # no timed round is the last (which evaluates)
    sim = Simulation(spec)
    plain = PlainFedAvg(spec, build_data(spec.data, spec.seed), sim.device)
    engine_s = plain_s = 0.0
    engine_clients = plain_clients = engine_samples = plain_samples = 0
    per_round: list[float] = []
    for i in tqdm(range(warmup + rounds), desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True):
        t0 = time.perf_counter()
        r = sim.next_round()
        t1 = time.perf_counter()
        p = plain.next_round()
        t2 = time.perf_counter()
        if i < warmup:  # first rounds pay for kernel selection and allocator growth on both sides
            continue
        engine_s += t1 - t0
        engine_clients += r.completed
        engine_samples += r.samples
        plain_s += t2 - t1
        plain_clients += p.clients
        plain_samples += p.samples
        per_round.append((r.completed / (t1 - t0)) / (p.clients / (t2 - t1)))
    engine_acc = sim.evaluate()[1]
    mode = "vectorised" if sim.vectorised else "sequential"
    out = {
        "device": sim.device_name,
        "engine_mode": mode,
        "client_group_size": spec.compute.client_group_size,
        "clients_per_round": spec.cohort_size(1),
        "warmup_rounds": warmup,
        "timed_rounds": rounds,
        "engine_seconds": engine_s,
        "plain_seconds": plain_s,
        "engine_clients_per_s": engine_clients / engine_s,
        "plain_clients_per_s": plain_clients / plain_s,
        "engine_samples_per_s": engine_samples / engine_s,
        "plain_samples_per_s": plain_samples / plain_s,
        "engine_test_accuracy": engine_acc,
        "plain_test_accuracy": plain.evaluate(),
    }
    out["ratio_clients_per_s"] = out["engine_clients_per_s"] / out["plain_clients_per_s"]
    out["ratio_samples_per_s"] = out["engine_samples_per_s"] / out["plain_samples_per_s"]
    out["ratio_per_round"] = spread(per_round)
    sim.close()
    return out


def quickstart_spec(device: str, training: str = "auto", precision: str = "fp32") -> Spec:
    """The quickstart preset (digits, cnn, 10 clients per round) with evaluation only at the end."""
    spec = preset_spec("quickstart")
    return spec.replace(
        compute={"device": device, "training": training, "precision": precision},
        evaluation={"every": 1_000_000},
    )


def format_line(label: str, res: dict[str, Any]) -> str:
    return (
        f"{label}: engine ({res['engine_mode']}) {res['engine_clients_per_s']:.2f} clients/s, "
        f"plain loop {res['plain_clients_per_s']:.2f} clients/s, ratio {res['ratio_clients_per_s']:.2f}x "
        f"(samples/s {res['engine_samples_per_s']:.0f} vs {res['plain_samples_per_s']:.0f}, "
        f"ratio {res['ratio_samples_per_s']:.2f}x) on {res['device']}, {res['timed_rounds']} timed rounds "
        f"(per-round ratio {res['ratio_per_round']['min']:.2f}-{res['ratio_per_round']['max']:.2f})"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="timed rounds (after --warmup)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--training", default="auto", choices=("auto", "vectorized", "sequential"))
    args = parser.parse_args(argv)
    res = compare(quickstart_spec(args.device, args.training, args.precision), rounds=args.rounds, warmup=args.warmup)
    print(format_line("quickstart", res))
    command = "python benchmarks/engine_throughput.py " + " ".join(argv if argv is not None else sys.argv[1:])
    record = {
        "benchmark": "engine_throughput",
        **stamp(command.strip(), args.device),
        "training": args.training,
        "torch_threads": torch.get_num_threads(),
        **res,
    }
    path = results_dir() / f"engine_throughput-{args.training}-{device_kind(args.device)}.json"
    path.write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"  -> {path}", file=sys.stderr)
    return res


if __name__ == "__main__":
    main()
