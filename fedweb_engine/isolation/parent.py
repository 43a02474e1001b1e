"""Process isolation: a round's client training in a fresh child process.

Flower users fixed GPU memory that leaked from client code by running each fit in a subprocess.
FedWeb's own training does not leak, but user models might; with ``compute.isolation =
"process"`` whatever the training leaves behind dies with the child at the end of the round.
Plans are drawn in the parent (so the run stays reproducible); the child trains them and writes
its results into the parent's tensors, so its answer is a few numbers.

Why ``subprocess`` and not ``multiprocessing``: a Celery prefork worker runs tasks in daemonic
(billiard) processes, and ``multiprocessing`` refuses to start children from those ("daemonic
processes are not allowed to have children"). Clearing the daemon flag would work around the
check, not the reason for it: nobody would then own the child if the worker died. Here the child
is ``python -m fedweb_engine.isolation.child``, a fresh interpreter like a ``spawn`` child, and
it is ours alone:

* its job arrives as a pickle on its stdin; every CPU tensor in it (data, the model clients
  received, the sum of their updates, error-feedback residuals, the plans) is moved once into POSIX shared
  memory (``share_memory_``, as ``torch.multiprocessing`` does) and its file descriptor is
  inherited by the child (``pass_fds``): nothing large is copied, nothing is named in /dev/shm,
  and the memory is freed when the last process holding it exits, however it exits. CUDA tensors
  travel as CUDA IPC handles (``torch.multiprocessing.reductions.reduce_tensor``);
* its answer (JSON) comes back on a pipe of its own, so user code printing to stdout cannot
  corrupt it, and the child's stdout goes to stderr (the engine CLI keeps stdout for JSON lines);
* it dies with its parent: the kernel kills it when the parent does (``PR_SET_PDEATHSIG`` on
  Linux), and it exits when its stdin reaches end-of-file (the parent holds it open for the
  whole round), so a worker killed with ``kill -9`` leaves no orphan training on;
* a child that dies without answering (killed, crashed) is an error naming its exit code or
  signal, never a hang; a CUDA out-of-memory error in the child is raised as one in the parent,
  so the worker's retry with a smaller client group still applies.

Cost: one interpreter start and ``import torch`` per round (measured in README.md). After an
isolated round ``Simulation.child_peak_rss_mb`` holds the child's peak resident memory; the round's
``rss_mb`` is the parent's, which is what stays flat when user code leaks.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import torch

from fedweb_engine.spec.schema import Spec
from fedweb_engine.training.dispatch import Collected, DeviceReplica
from fedweb_engine.training.plan import GroupPlan

ROOT = Path(__file__).resolve().parents[2]
CHILD_MODULE = "fedweb_engine.isolation.child"


def train_in_child(
    spec: Spec,
    replicas: Sequence[DeviceReplica],
    plans: Sequence[GroupPlan],
    broadcast_weights: torch.Tensor,
    residuals: torch.Tensor | None,
    update_sum: torch.Tensor,
    *,
    vectorised: bool,
    clip_norm: float | None = None,
    collect: Collected | None = None,
) -> tuple[dict[str, torch.Tensor], float | None, float | None]:
    """:func:`~fedweb_engine.training.dispatch.train_plans` in a fresh process, writing into the same tensors.

    Returns the loss, weight and sample sums (as in-process), the child's peak resident memory and
    its peak VRAM reserve (None without a GPU) in MB. The replicas' loss scales come back updated.
    """
    job = {
        "spec": spec.to_dict(),
        "vectorised": vectorised,
        "threads": torch.get_num_threads(),  # the same arithmetic order as in-process training
        "devices": [str(r.device) for r in replicas],
        "data": [r.data for r in replicas],
        "scales": [r.trainer.scaler.scale for r in replicas],
        "broadcast_weights": broadcast_weights,
        "residuals": residuals,
        "update_sum": update_sum,
        "plans": plans,
        "clip_norm": clip_norm,
        "collect": collect,  # its tensors are shared too: the child writes the rows in place
    }
    payload, fds = dumps_shared(job)
    outcome = run_child(payload, fds)
    if update_sum.device.type == "cuda":
        torch.cuda.ipc_collect()  # free blocks the child had opened, now that it has closed them
    if "error" in outcome:
        message = f"client training failed in the isolated process: {outcome['error']}"
        raise torch.OutOfMemoryError(message) if outcome.get("out_of_memory") else RuntimeError(message)
    for replica, scale in zip(replicas, outcome["scales"], strict=True):
        replica.trainer.scaler.scale = scale
    keys = ("loss", "weight", "samples", "unclipped", "client_losses", *(("rows",) if collect else ()))
    stats = {k: torch.tensor(outcome[k], device=update_sum.device) for k in keys}
    return stats, outcome.get("peak_rss_mb"), outcome.get("peak_vram_mb")


def run_child(payload: bytes, fds: set[int]) -> dict:
    """Start the child with ``payload`` on its stdin and ``fds`` inherited; wait for its answer."""
    answer_read, answer_write = os.pipe()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", CHILD_MODULE, str(answer_write), str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=2,  # the raw stderr: Celery replaces sys.stderr with a logger that has no fd
            pass_fds=(answer_write, *sorted(fds)),
            env=_child_env(),
        )
    except BaseException:
        os.close(answer_read)
        raise
    finally:
        os.close(answer_write)  # the child holds the only write end: EOF means it has exited
    try:
        answer = _exchange(child, payload, answer_read)
    except BaseException:  # e.g. a task time limit in the parent: the round is abandoned
        child.kill()
        raise
    finally:
        child.stdin.close()  # only now: the child treats end-of-file on stdin as its parent's death
        code = child.wait()
    try:
        return json.loads(answer)
    except ValueError:
        return {"error": f"the child process {_describe_exit(code)} before reporting"}


def _exchange(child: subprocess.Popen, payload: bytes, answer_read: int) -> bytes:
    with os.fdopen(answer_read, "rb") as answers:
        try:
            child.stdin.write(payload)
            child.stdin.flush()
        except BrokenPipeError:
            pass  # it died before reading its job: reported from its exit code
        return answers.read()


def _child_env() -> dict[str, str]:
    # The child must import this code base whatever the parent's working directory is.
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# -- tensors through shared memory ------------------------------------------------------------


class _SharingPickler(pickle.Pickler):
    """Pickles tensors as handles to shared memory instead of copies of their data."""

    def __init__(self, file: IO[bytes]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.fds: set[int] = set()

    def reducer_override(self, obj):
        if not isinstance(obj, torch.Tensor):
            return NotImplemented
        if obj.is_cuda:
            from torch.multiprocessing.reductions import reduce_tensor

            return reduce_tensor(obj)  # a CUDA IPC handle; the parent keeps the memory alive meanwhile
        layout = (obj.dtype, tuple(obj.shape), obj.stride(), obj.storage_offset())
        storage = obj.untyped_storage()
        if storage.nbytes() == 0:
            return _empty, layout[:2]  # an empty storage cannot be mapped
        if not storage.is_shared():
            _check_shared_memory(storage.nbytes())
        # Moves the storage into shared memory in place (once; later rounds reuse it), so the
        # parent's own references see what the child writes.
        fd, size = storage._share_fd_cpu_()
        self.fds.add(fd)
        return _shared, (fd, size, *layout)


SHM_DIR = "/dev/shm"


def shm_free_bytes() -> int | None:
    """Free bytes of the shared-memory file system, None where there is no /dev/shm."""
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _check_shared_memory(nbytes: int) -> None:
    # A full tmpfs does not fail the allocation: the first write to a missing page kills the
    # process with SIGBUS. Docker gives containers 64 MB of /dev/shm unless told otherwise.
    free = shm_free_bytes()
    if free is not None and nbytes > free:
        raise RuntimeError(
            f"process isolation needs {nbytes / 2**20:,.0f} MB more shared memory but {SHM_DIR} has "
            f"{free / 2**20:,.0f} MB free: enlarge it (Docker: shm_size) or set compute.isolation to none"
        )


def dumps_shared(obj: object) -> tuple[bytes, set[int]]:
    """Pickle ``obj`` with its tensors in shared memory; returns the bytes and the fds to pass on."""
    buffer = io.BytesIO()
    pickler = _SharingPickler(buffer)
    pickler.dump(obj)
    return buffer.getvalue(), pickler.fds


_mapped: dict[int, torch.UntypedStorage] = {}  # in the child while loading: fd -> its storage


def load_shared(file: IO[bytes]) -> object:
    """Unpickle what :func:`dumps_shared` wrote (in the child, with its fds inherited)."""
    try:
        return pickle.load(file)
    finally:
        for fd in _mapped:
            os.close(fd)  # the mappings stay valid without the descriptor
        _mapped.clear()


def _shared(fd: int, size: int, dtype: torch.dtype, shape: tuple, stride: tuple, offset: int) -> torch.Tensor:
    storage = _mapped.get(fd)
    if storage is None:  # tensors sharing a storage (views) share one mapping
        storage = _mapped[fd] = torch.UntypedStorage._new_shared_fd_cpu(fd, size)
    return torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)


def _empty(dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    return torch.empty(shape, dtype=dtype)
