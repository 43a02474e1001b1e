"""A member rank (1..N-1): it builds the simulation rank 0 tells it to, joins the group, and runs the
rounds rank 0 starts, until rank 0 closes the hold, goes away, or leaves it idle too long.

Commands arrive through the store as numbered JSON values (``cmd/<n>``): ``open`` (a spec, the round
state to start from, the group's name and timeouts), ``round`` and ``close``. A member answers
``open`` with ``ready/<n>/<rank>`` once its simulation is built, and writes ``error/<rank>`` before it
leaves on an error, so rank 0 says what went wrong instead of only that a peer went away.

Run as a process of this machine (``python -m fedweb_engine.distributed.member``, started by
:mod:`~fedweb_engine.distributed.local`), or called in a worker that another worker recruited.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from fedweb_engine.distributed.group import RankFailure, RankGroup
from fedweb_engine.distributed.rank_round import run_rank_round
from fedweb_engine.distributed.share import RankRows
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec
from fedweb_engine.state.checkpoint import read_checkpoint
from fedweb_engine.state.round_state import complete_state

POLL_SECONDS = 1.0


class NoClientFiles:
    """A member's per-client state files: none. Rank 0 holds the files and lends the round's rows
    (``share.RankRows``), so a member restores, commits and snapshots nothing."""

    def __init__(self) -> None:
        self.round = 0
        self.stores: dict = {}

    def commit(self, round_number: int) -> None:
        self.round = round_number

    def describe(self) -> dict:
        return {"round": self.round, "stores": {}}

    def restore(self, round_number: int, described: dict | None = None, snapshot=None) -> None:
        self.round = int(round_number)

    def save_snapshot(self, folder) -> bool:
        return False

    def close(self) -> None:
        """Nothing to close."""


def open_simulation(command: dict, device: torch.device, data_root: str | None = None) -> Simulation:
    """The simulation an ``open`` command describes, on ``device``, at the round of its state."""
    spec = Spec.from_stored(command["spec"])
    sim = Simulation(spec, device=str(device), data_root=data_root, client_state=RankRows, client_files=NoClientFiles())
    if command.get("state"):
        tensors, meta = read_checkpoint(command["state"])
        sim.load_state_dict(complete_state(tensors), meta)
    if sim.round != command["round"]:
        raise RuntimeError(f"the state {command.get('state')} is of round {sim.round}, not {command['round']}")
    return sim


def serve(
    store,
    rank: int,
    size: int,
    *,
    device: torch.device,
    label: str,
    idle_timeout: float | None = None,
    data_root: str | None = None,
    address: str | None = None,
    on_round_start: Callable[[int], None] | None = None,
) -> str:
    """Serve as rank ``rank`` until closed; returns why it stopped ("closed", "idle", "leader gone").
    ``address``: the interface this rank's connections bind (None: its host name's address). Raises
    :class:`RankFailure` when the group fails (the error is written for rank 0 first)."""
    sim: Simulation | None = None
    group: RankGroup | None = None
    seq = 0
    store.set(f"label/{rank}", label)
    try:
        while True:
            command = _next_command(store, seq, idle_timeout)
            if command is None or command["op"] == "close":
                return "closed" if command else "idle"
            seq += 1
            if command["op"] == "open":
                if group is not None:
                    group.close()
                sim = open_simulation(command, device, data_root)
                store.set(f"ready/{seq}/{rank}", "ok")
                group = RankGroup.join(
                    dist.PrefixStore(command["group"], store), rank, size, device=device,
                    timeout=command["join_timeout"], address=address,
                )  # fmt: skip
            elif command["op"] == "round":
                if sim is None or group is None or sim.round != command["round"] - 1:
                    raise RuntimeError(
                        f"rank {rank} cannot run round {command['round']}: it holds no simulation at the round before"
                    )
                group.set_timeout(command["timeout"])
                if on_round_start is not None:
                    on_round_start(command["round"])
                run_rank_round(sim, group)
    except (dist.DistStoreError, ConnectionError) as e:
        return f"leader gone ({type(e).__name__})"
    except Exception as e:
        _report(store, rank, e)
        raise
    finally:
        if group is not None:
            group.close()
        if sim is not None:
            sim.close()


def _next_command(store, seq: int, idle_timeout: float | None) -> dict | None:
    """The command numbered ``seq``; None when it has not come within ``idle_timeout`` seconds."""
    key = f"cmd/{seq}"
    started = time.monotonic()
    while True:
        try:
            store.wait([key], datetime.timedelta(seconds=POLL_SECONDS))
            return json.loads(store.get(key))
        except dist.DistStoreError as e:
            if "timeout" not in str(e).lower() and "timed out" not in str(e).lower():
                raise
        if idle_timeout is not None and time.monotonic() - started > idle_timeout:
            return None


def _report(store, rank: int, error: BaseException) -> None:
    try:
        store.set(f"error/{rank}", f"{type(error).__name__}: {error}"[:2000])
    except Exception:  # the store may be the thing that failed
        pass


def _crash_hook(rank: int) -> Callable[[int], None] | None:
    """Fault injection for the crash tests (unset in any real run): ``FEDWEB_RANK_CRASH_AT=1:3`` kills
    rank 1 with SIGKILL as round 3 starts, once per ``FEDWEB_RANK_CRASH_ONCE`` marker file if given."""
    at = os.environ.get("FEDWEB_RANK_CRASH_AT")
    if not at:
        return None
    crash_rank, crash_round = (int(x) for x in at.split(":"))
    once = os.environ.get("FEDWEB_RANK_CRASH_ONCE")

    def hook(round_number: int) -> None:
        if (rank, round_number) != (crash_rank, crash_round):
            return
        if once:
            try:
                os.close(os.open(once, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return  # it crashed once already: the round's second try runs
        os.kill(os.getpid(), signal.SIGKILL)

    return hook


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A member rank of a distributed FedWeb run (started by rank 0).")
    parser.add_argument("--store", required=True, help="host:port of rank 0's TCPStore")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--label", default="")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--address", default=None, help="the interface this rank binds (default: the host name's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    host, port = args.store.rsplit(":", 1)
    store = dist.TCPStore(host, int(port), args.size, False, timeout=datetime.timedelta(seconds=60))
    device = torch.device(args.device)
    label = args.label or f"{os.uname().nodename} {device}"
    try:
        serve(
            store, args.rank, args.size, device=device, label=label, data_root=args.data_root, address=args.address,
            on_round_start=_crash_hook(args.rank),
        )  # fmt: skip
    except RankFailure as e:
        print(f"rank {args.rank}: {e}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
