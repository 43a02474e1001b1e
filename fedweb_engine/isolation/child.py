"""The isolated child: ``python -m fedweb_engine.isolation.child ANSWER_FD PARENT_PID``.

Started by :func:`fedweb_engine.isolation.parent.run_child` for one round: it reads its job from stdin,
trains the planned client groups into the parent's shared tensors, writes one JSON answer to
``ANSWER_FD`` and exits without tearing anything down, so whatever user code leaked goes with it.
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from pathlib import Path

import torch

from fedweb_engine.communication.codecs import make_codec
from fedweb_engine.components.plugins import load_plugins
from fedweb_engine.isolation.parent import load_shared
from fedweb_engine.models import build_model
from fedweb_engine.probes.memory import cuda_peak_mb
from fedweb_engine.spec.schema import Spec
from fedweb_engine.training.client import build_trainer
from fedweb_engine.training.devices import prepare
from fedweb_engine.training.dispatch import DeviceReplica, train_plans

_PR_SET_PDEATHSIG = 1
_PARENT_GONE = 70


def main(argv: list[str]) -> None:
    answer_fd, parent_pid = int(argv[0]), int(argv[1])
    os.set_inheritable(answer_fd, False)  # processes user code starts must not hold our answer open
    _die_with_parent(parent_pid)
    outcome = answer(lambda: load_shared(sys.stdin.buffer))
    outcome["peak_rss_mb"] = _peak_rss_mb()
    _write_all(answer_fd, json.dumps(outcome).encode())
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no teardown: the memory goes back to the system with the process


def answer(read_job: Callable[[], dict]) -> dict:
    """Train the job ``read_job`` returns; the answer for the parent, success or error.

    On either path nothing of the job outlives this call: the job, and on error the exception
    with its traceback (whose frames hold the job's tensors), are dropped and collected before
    it returns. A CUDA tensor received from the parent is an IPC handle whose reference count
    the parent waits on before it may reuse the memory; ``os._exit`` would skip releasing it.
    """
    outcome = _attempt(read_job)  # the exception and its frames die with this call's frame
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.ipc_collect()
    return outcome


def _attempt(read_job: Callable[[], dict]) -> dict:
    try:
        load_plugins()  # user code runs here, so its plugins are loaded here too
        job = read_job()
        threading.Thread(target=_exit_at_end_of_stdin, daemon=True).start()
        return _train(job)
    except Exception as e:  # reported to the parent, which raises it there
        traceback.print_exc()
        return {"error": f"{type(e).__name__}: {e}", "out_of_memory": isinstance(e, torch.OutOfMemoryError)}


def _die_with_parent(parent_pid: int) -> None:
    """Exit when the parent dies, even by ``kill -9``: nothing would collect our answer."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before we asked to follow it
        os._exit(_PARENT_GONE)


def _exit_at_end_of_stdin() -> None:
    # The parent holds our stdin open until it has our answer; end-of-file before that means it
    # died (the portable half of _die_with_parent). Raw os.read: no buffered-reader lock is held.
    while os.read(0, 4096):
        pass
    os._exit(_PARENT_GONE)


def _peak_rss_mb() -> float | None:
    """This process's own peak resident memory. Not ``ru_maxrss``: Linux carries that over from the
    parent's memory across the fork and exec that started us."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _train(job: dict) -> dict:
    torch.set_num_threads(job["threads"])
    spec = Spec.from_dict(job["spec"])
    prepare([torch.device(d) for d in job["devices"]], spec.compute.precision)
    first = job["data"][0]
    model = build_model(spec.model, first.input_shape, first.num_classes)
    replicas = [
        DeviceReplica(torch.device(d), data, build_trainer(spec, model, torch.device(d), job["vectorised"]))
        for d, data in zip(job["devices"], job["data"], strict=True)
    ]
    for replica, scale in zip(replicas, job["scales"], strict=True):
        replica.trainer.scaler.scale = scale
    layout = [p.numel() for p in model.parameters()]
    uplink = make_codec(spec.communication.uplink.name, layout, spec.communication.uplink.options)
    stats = train_plans(
        replicas,
        job["plans"],
        job["broadcast_weights"],
        uplink,
        job["residuals"],
        job["update_sum"],
        clip_norm=job.get("clip_norm"),
        collect=job.get("collect"),
    )
    out = {k: float(v) if v.dim() == 0 else v.tolist() for k, v in stats.items()}
    for d in {r.device for r in replicas if r.device.type == "cuda"}:
        torch.cuda.synchronize(d)  # the parent reads update_sum and residuals as soon as we answer
    out["scales"] = [r.trainer.scaler.scale for r in replicas]
    out["peak_vram_mb"] = cuda_peak_mb([r.device for r in replicas])  # the parent adds it to its own
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
