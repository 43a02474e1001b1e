"""Command line: ``python -m fedweb_engine run SPEC.json`` or ``run --preset NAME``.

One RoundResult JSON object per line on stdout; a progress bar (round, loss, accuracy, ETA) on
stderr, so ``> rounds.jsonl`` captures clean data.

Dataset files (``data.path``) are read only inside ``--data-root``: by default
``$FEDWEB_DATA_DIR/datasets`` when FEDWEB_DATA_DIR is set, else the current directory. This is
the user's own terminal, so ``--data-root /`` lifts the confinement for files they own anywhere.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fedweb_engine.components.plugins import PluginError, load_plugins
from fedweb_engine.progress_bar import ProgressBar
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.presets import PRESETS, preset_specs
from fedweb_engine.spec.schema import Spec, SpecError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fedweb_engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run an experiment in the terminal")
    run.add_argument("spec", nargs="?", help="experiment spec JSON file")
    run.add_argument("--preset", choices=sorted(PRESETS), help="run a named preset instead of a file")
    run.add_argument("--rounds", type=int, help="override the number of rounds")
    run.add_argument("--device", help="override compute.device (auto, cpu, cuda, cuda:N, cuda:all)")
    run.add_argument("--stop-after", type=int, metavar="R", help="stop after round R (e.g. to checkpoint mid-run)")
    run.add_argument("--checkpoint", type=Path, help="write a checkpoint here when the run stops")
    run.add_argument("--resume", type=Path, help="continue from this checkpoint")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument(
        "--data-root",
        type=Path,
        help="folder that data.path is relative to and may not leave "
        "(default: $FEDWEB_DATA_DIR/datasets if set, else the current directory)",
    )
    sub.add_parser("presets", help="list the named presets")
    args = parser.parse_args(argv)
    try:
        load_plugins()
    except PluginError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        if args.command == "presets":
            return _list_presets()
        return _run(args)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _list_presets() -> int:
    for name, preset in PRESETS.items():
        print(f"{name:22} {preset['title']}")
        print(f"{'':22} {preset['description']}")
    return 0


def _load_specs(args) -> list[Spec]:
    if args.preset:
        specs = preset_specs(args.preset)
    elif args.spec:
        specs = [Spec.from_json(Path(args.spec).read_text())]
    elif args.resume:
        specs = []
    else:
        raise SpecError("spec", "is missing: give a SPEC.json file or --preset NAME")
    return [_override(s, args.rounds, args.device) for s in specs]


def _override(spec: Spec, rounds: int | None, device: str | None) -> Spec:
    if rounds is None and device is None:
        return spec
    d = spec.to_dict()
    if rounds is not None:
        d["rounds"] = rounds
        schedule = d["participation"]["schedule"]
        if schedule and len(schedule) < rounds:
            # Repeat a shorter schedule so --rounds can lengthen a preset like varying-participants.
            d["participation"]["schedule"] = (schedule * (rounds // len(schedule) + 1))[:rounds]
    if device:
        d["compute"]["device"] = device
    return Spec.from_dict(d)


def _run(args) -> int:
    if args.resume:
        sims = [Simulation.from_checkpoint(args.resume, device=args.device, data_root=args.data_root)]
    else:
        sims = [Simulation(spec, data_root=args.data_root) for spec in _load_specs(args)]
    for i, sim in enumerate(sims):
        for note in sim.notes:
            print(f"note: {note}", file=sys.stderr)
        label = f"{args.preset or 'run'}" + (
            f" [{i + 1}/{len(sims)}: uplink {sim.spec.communication.uplink.name}]" if len(sims) > 1 else ""
        )
        with ProgressBar(sim.spec.rounds, initial=sim.round, label=label, enabled=not args.quiet) as bar:
            while not sim.done and (args.stop_after is None or sim.round < args.stop_after):
                result = sim.next_round()
                print(json.dumps(result.to_dict()), flush=True)
                bar.update(result)
        if len(sims) > 1:
            per_client = result.bytes_up / max(1, result.completed)
            print(
                f"uplink {sim.spec.communication.uplink.name:5}: {per_client:,.0f} bytes per client "
                f"(fp32 formula {4 * sim.num_params:,} bytes)",
                file=sys.stderr,
            )
        if args.checkpoint:
            sim.save_checkpoint(args.checkpoint)
    return 0


if __name__ == "__main__":
    sys.exit(main())
