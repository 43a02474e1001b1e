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
import socket
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from fedweb_engine.components.plugins import PluginError, load_plugins
from fedweb_engine.distributed.group import RankFailure
from fedweb_engine.distributed.local import local_hold, rank_devices, ranks_for, threads_per_rank
from fedweb_engine.progress_bar import ProgressBar
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.presets import PRESETS, preset_specs
from fedweb_engine.spec.schema import Spec, SpecError
from fedweb_engine.state.checkpoint import read_checkpoint


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
    except RankFailure as e:  # a rank died or stalled: the round did not complete, and nothing claims it did
        print(f"error: the run stopped: {e}", file=sys.stderr)
        return 3


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
        sims = [_resumed(args)]
    else:
        sims = [_simulation(spec, args.data_root) for spec in _load_specs(args)]
    for i, sim in enumerate(sims):
        for note in sim.notes:
            print(f"note: {note}", file=sys.stderr)
        label = f"{args.preset or 'run'}" + (
            f" [{i + 1}/{len(sims)}: uplink {sim.spec.communication.uplink.name}]" if len(sims) > 1 else ""
        )
        with _ranks(sim, args) as next_round, ProgressBar(sim.spec.rounds, initial=sim.round, label=label,
                                                          enabled=not args.quiet) as bar:  # fmt: skip
            noted = len(sim.notes)
            while not sim.done and (args.stop_after is None or sim.round < args.stop_after):
                result = next_round()
                print(json.dumps(result.to_dict()), flush=True)
                for note in sim.notes[noted:]:  # made during the round (compute.compile's decision, ...)
                    bar.note(note)
                noted = len(sim.notes)
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


def _simulation(spec: Spec, data_root, device: str | None = None) -> Simulation:
    """The simulation this process runs: with ``compute.ranks`` > 1 it is rank 0, on the first
    rank's device (the members, started by ``_ranks``, take the others)."""
    ranks = ranks_for(spec)
    if ranks > 1:
        devices = rank_devices(device or spec.compute.device, ranks)
        torch.set_num_threads(threads_per_rank(devices))
        device = str(devices[0])
    return Simulation(spec, device=device, data_root=data_root)


def _resumed(args) -> Simulation:
    tensors, meta = read_checkpoint(args.resume)
    sim = _simulation(Spec.from_stored(meta["spec"]), args.data_root, args.device)
    sim.load_state_dict(tensors, meta)
    return sim


@contextmanager
def _ranks(sim: Simulation, args):
    """``next_round`` for this run: the simulation's own, or, with ``compute.ranks`` > 1, a round over
    ranks on this machine (members started here, held for the whole run)."""
    ranks = ranks_for(sim.spec)
    if ranks == 1:
        yield sim.next_round
        return
    devices = rank_devices(args.device or sim.spec.compute.device, ranks)
    hold, members = local_hold(devices, label=socket.gethostname(), data_root=str(args.data_root or "") or None)
    try:
        hold.open(sim, str(args.resume) if args.resume else None)
        print(f"note: {ranks} ranks ({hold.group.backend}) formed in {hold.setup_seconds:.3f} s; "
              f"members built in {hold.open_seconds:.2f} s", file=sys.stderr)  # fmt: skip
        yield lambda: hold.run_round(sim)
    finally:
        hold.close()
        members.stop()


if __name__ == "__main__":
    sys.exit(main())
