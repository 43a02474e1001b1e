"""Member ranks as child processes of this machine: a worker that owns several devices, or the
engine's command line with ``compute.ranks`` > 1.

Each member is a fresh interpreter (``python -m fedweb_engine.distributed.member``), never a fork:
CUDA cannot be forked and a Celery pool process may not fork daemons. A member dies with its parent
(Linux's parent-death signal), and leaves on its own when rank 0's store goes away.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field

import torch

from fedweb_engine.distributed.leader import Hold, open_store

MODULE = "fedweb_engine.distributed.member"


def rank_devices(device: str, size: int) -> list[torch.device]:
    """Each rank's device for ``compute.device`` over ``size`` ranks of one machine: CPU ranks all on
    the CPU; CUDA ranks one GPU each, round-robin over the GPUs there are (``cuda:all``, ``cuda``,
    ``auto`` with GPUs); ``cuda:N`` puts every rank on that GPU."""
    gpus = torch.cuda.device_count()
    if device == "cpu" or (device == "auto" and gpus == 0):
        return [torch.device("cpu")] * size
    if device.startswith("cuda:") and device != "cuda:all":
        return [torch.device(device)] * size
    if gpus == 0:
        raise RuntimeError(f"compute.device {device!r} asks for CUDA, and there is no GPU here")
    return [torch.device(f"cuda:{k % gpus}") for k in range(size)]


def ranks_for(spec) -> int:
    """The ranks a run on this machine uses: ``compute.ranks``; for ``auto`` (0) one per GPU (one rank
    on a CPU, whose cores one process already uses); ``compute.device: cuda:all`` with the default one
    rank means one rank per GPU (each GPU its own process, NCCL between them)."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if spec.compute.ranks == 1 and spec.compute.device == "cuda:all":
        return max(1, gpus)
    if spec.compute.ranks:
        return spec.compute.ranks
    return max(1, gpus) if spec.compute.device != "cpu" and gpus else 1


def threads_per_rank(devices: list[torch.device]) -> int:
    """Torch threads for each CPU rank: the machine's cores shared out (at least one)."""
    cpu_ranks = sum(d.type == "cpu" for d in devices) or 1
    return max(1, (os.cpu_count() or 1) // cpu_ranks)


@dataclass
class LocalMembers:
    """Ranks 1..N-1 as child processes on ``devices[1:]``."""

    processes: dict[int, subprocess.Popen] = field(default_factory=dict)

    @classmethod
    def start(cls, port: int, devices: list[torch.device], threads: int, label: str, data_root: str | None):
        members = cls()
        for rank in range(1, len(devices)):
            command = [
                sys.executable, "-m", MODULE, "--store", f"127.0.0.1:{port}", "--rank", str(rank),
                "--size", str(len(devices)), "--device", str(devices[rank]), "--threads", str(threads),
                "--label", f"{label} {devices[rank]}", "--address", "127.0.0.1",
            ] + (["--data-root", data_root] if data_root else [])  # fmt: skip
            env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
            members.processes[rank] = subprocess.Popen(command, env=env, preexec_fn=_die_with_parent)
        return members

    def dead(self) -> list[int]:
        return [rank for rank, p in self.processes.items() if p.poll() is not None]

    def pids(self) -> list[int]:
        return [p.pid for p in self.processes.values()]

    def stop(self, grace: float = 5.0) -> None:
        """Let the members leave (after a ``close``), then kill those that did not."""
        for p in self.processes.values():
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.processes = {}


def local_hold(
    devices: list[torch.device],
    *,
    label: str,
    threads: int | None = None,
    data_root: str | None = None,
    join_timeout: float = 120.0,
    timeout: float | None = None,
) -> tuple[Hold, LocalMembers]:
    """A hold over this machine's ``devices`` (rank 0: this process, on ``devices[0]``): the store,
    and the members started as child processes. Open it with :meth:`Hold.open`."""
    store = open_store("127.0.0.1", 0, len(devices))
    members = LocalMembers.start(store.port, devices, threads or threads_per_rank(devices), label, data_root)
    hold = Hold(
        store, len(devices), f"{label} {devices[0]}", address="127.0.0.1", join_timeout=join_timeout,
        timeout_setting=timeout, dead=members.dead,
    )  # fmt: skip
    return hold, members


def _die_with_parent() -> None:
    """In the child, before exec: die with the parent (PR_SET_PDEATHSIG), so no member outlives it."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except OSError:  # not Linux: the member still leaves when the store's server goes away
        pass
