"""The process group of a distributed run: its collectives, each bounded by a timeout, and the one
error every failure becomes (:class:`RankFailure`).

The group is a ``ProcessGroupGloo`` (CPU tensors) or ``ProcessGroupNCCL`` (CUDA tensors) made from a
store, never ``torch.distributed``'s default group: a worker process holds one group per
experiment it runs distributed, one after another, and a group is dropped with the object.

A dead peer breaks its connections, which Gloo reports at once; a stalled one is caught by the
timeout each collective waits with (:meth:`RankGroup.set_timeout`), so no rank waits past it.
"""

from __future__ import annotations

import datetime
import os
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

# Group set-ups made by this process (what tests and the benchmark read: one per hold, not per round).
SETUPS = {"count": 0}


class RankFailure(RuntimeError):
    """A rank of the group died, stalled past the timeout or failed: the round cannot be completed
    by this group and is not recorded."""


@dataclass
class RankGroup:
    """A process group of ``size`` ranks seen from ``rank``; ``backend`` is ``gloo`` or ``nccl``."""

    pg: object
    rank: int
    size: int
    backend: str
    timeout: float  # seconds each collective may wait
    device: torch.device = torch.device("cpu")  # this rank's training device
    setup_seconds: float = 0.0
    collective_seconds: float = 0.0  # spent in collectives since the last reset (this rank's view)
    _tag: int = field(default=0, repr=False)

    @classmethod
    def join(
        cls, store, rank: int, size: int, *, device: torch.device, timeout: float, address: str | None = None
    ) -> RankGroup:
        """Meet the other ranks through ``store`` (a rendezvous: every rank calls this) and connect."""
        backend = "nccl" if device.type == "cuda" else "gloo"
        started = time.perf_counter()
        delta = datetime.timedelta(seconds=timeout)
        try:
            if backend == "nccl":
                # A timed-out NCCL collective raises in the waiting thread (blocking wait) instead of the
                # watchdog tearing the whole process down: a worker outlives a dead rank.
                os.environ.setdefault("TORCH_NCCL_BLOCKING_WAIT", "1")
                opts = dist.ProcessGroupNCCL.Options()
                opts._timeout = delta
                torch.cuda.set_device(device)
                pg = dist.ProcessGroupNCCL(store, rank, size, opts)
            elif address:
                opts = dist.ProcessGroupGloo._Options()
                opts._timeout = delta
                opts._devices = [dist.ProcessGroupGloo.create_device(hostname=address)]
                pg = dist.ProcessGroupGloo(store, rank, size, opts)
            else:
                pg = dist.ProcessGroupGloo(store, rank, size, delta)
        except (RuntimeError, dist.DistStoreError) as e:
            raise RankFailure(f"rank {rank} of {size}: the group did not form within {timeout:.0f} s ({e})") from e
        SETUPS["count"] += 1
        return cls(pg, rank, size, backend, timeout, device, setup_seconds=time.perf_counter() - started)

    @property
    def wire(self) -> torch.device:
        """Where tensors must be to travel: host memory for Gloo, the rank's GPU for NCCL."""
        return self.device if self.backend == "nccl" else torch.device("cpu")

    def set_timeout(self, seconds: float) -> None:
        """Bound every following collective by ``seconds`` (the round's measured length sets it)."""
        self.timeout = float(seconds)

    def all_reduce_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the ranks, in place."""
        return self._wait("all-reduce", lambda: self.pg.allreduce([tensor]), tensor)

    def send(self, tensor: torch.Tensor, to: int) -> None:
        self._wait(f"send to rank {to}", lambda: self.pg.send([tensor], to, self._next_tag(to)), tensor)

    def recv(self, tensor: torch.Tensor, source: int) -> torch.Tensor:
        return self._wait(
            f"receive from rank {source}", lambda: self.pg.recv([tensor], source, self._next_tag(source)), tensor
        )

    def close(self) -> None:
        """Drop the connections (the other ranks' next collective fails at once)."""
        pg, self.pg = self.pg, None
        if pg is not None:
            try:
                pg.abort() if self.backend == "nccl" else pg.shutdown()
            except Exception:  # a broken group may refuse to shut down cleanly: it is dropped anyway
                pass

    def _next_tag(self, peer: int) -> int:
        # Point-to-point messages between two ranks match in order; one tag per message keeps a
        # late message from being taken for the next.
        self._tag += 1
        return self._tag

    def _wait(self, what: str, start, tensor: torch.Tensor) -> torch.Tensor:
        if self.pg is None:
            raise RankFailure(f"rank {self.rank}: the group is closed")
        began = time.perf_counter()
        try:
            work = start()
            work.wait(datetime.timedelta(seconds=self.timeout))
        except RuntimeError as e:
            waited = time.perf_counter() - began
            raise RankFailure(
                f"rank {self.rank} of {self.size}: {what} failed after {waited:.1f} s "
                f"(timeout {self.timeout:.0f} s): {str(e).splitlines()[0][:300]}"
            ) from e
        if tensor.device.type == "cuda":
            torch.cuda.current_stream(tensor.device).synchronize()
        self.collective_seconds += time.perf_counter() - began
        return tensor
