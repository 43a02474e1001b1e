"""Engine vs a plain sequential PyTorch FedAvg loop on the same workload, in one process.

Issue 2, acceptance 9: ``python benchmarks/engine_throughput.py [--rounds N] [--device D]`` runs the
quickstart preset with the engine and with :class:`benchmarks.plain.PlainFedAvg`, round for round
interleaved (so both see the same load on a shared machine), and prints clients/s for both and
their ratio. :func:`compare` is also what ``python -m benchmarks vs_plain`` uses.

Both sides are timed over the same span of work: local training of every client plus averaging
(for the engine, its ``train_seconds``: training, uplink codec, aggregation and server step;
sampling and evaluation are outside both).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `workers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm

from benchmarks.plain import PlainFedAvg
from workers.engine.data import build_data
from workers.engine.presets import preset_spec
from workers.engine.runner import Simulation
from workers.engine.spec import Spec


def compare(spec: Spec, *, rounds: int, warmup: int = 1, desc: str = "engine vs plain") -> dict[str, Any]:
    """Run ``warmup + rounds`` rounds of each, interleaved; return clients/s, samples/s and ratios."""
    spec = spec.replace(rounds=warmup + rounds)
    sim = Simulation(spec)
    plain = PlainFedAvg(spec, build_data(spec.data, spec.seed), sim.device)
    engine_s = plain_s = 0.0
    engine_clients = plain_clients = engine_samples = plain_samples = 0
    for i in tqdm(range(warmup + rounds), desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True):
        r = sim.next_round()
        p = plain.next_round()
        if i < warmup:  # first rounds pay for kernel selection and allocator growth on both sides
            continue
        engine_s += r.train_seconds
        engine_clients += r.completed
        engine_samples += r.samples
        plain_s += p.seconds
        plain_clients += p.clients
        plain_samples += p.samples
    engine_acc = r.test_accuracy
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
        f"ratio {res['ratio_samples_per_s']:.2f}x) on {res['device']}, {res['timed_rounds']} timed rounds"
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
    return res


if __name__ == "__main__":
    main()
