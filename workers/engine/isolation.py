"""Process isolation: a round's client training in a fresh child process.

Flower users fixed GPU memory that leaked from client code by running each fit in a subprocess.
FedWeb's own training does not leak, but user models might; with ``compute.isolation =
"process"`` whatever the training leaves behind dies with the child at the end of the round.
Plans are drawn in the parent (so the run stays reproducible); data, weights, the accumulator
and error-feedback residuals are shared with the child through torch.multiprocessing (shared
memory on the host, IPC handles on CUDA), so nothing large is copied.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.multiprocessing as mp

if TYPE_CHECKING:
    from workers.engine.plan import GroupPlan
    from workers.engine.runner import Simulation


def train_in_child(sim: Simulation, plans: list[GroupPlan]) -> dict[str, torch.Tensor]:
    ctx = mp.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    job = {
        "spec": sim.spec.to_dict(),
        "vectorised": sim.vectorised,
        "devices": [str(r.device) for r in sim.replicas],
        "data": [r.data for r in sim.replicas],
        "scales": [r.trainer.scaler.scale for r in sim.replicas],
        "received": sim.received,
        "residuals": sim.residuals,
        "acc": sim.acc,
        "plans": plans,
    }
    child = ctx.Process(target=_child_main, args=(job, sender), daemon=True)
    child.start()
    sender.close()
    outcome = _wait_for(child, receiver)
    if "error" in outcome:
        raise RuntimeError(f"client training failed in the isolated process: {outcome['error']}")
    for replica, scale in zip(sim.replicas, outcome["scales"], strict=True):
        replica.trainer.scaler.scale = scale
    return {k: torch.tensor(outcome[k], device=sim.device) for k in ("loss", "weight", "samples")}


def _wait_for(child, receiver) -> dict:
    """The child's answer; a child that dies without one (killed, crashed) is an error, not a hang."""
    while not receiver.poll(1.0):
        if not child.is_alive():
            child.join()
            return {"error": f"the child process exited with code {child.exitcode} before reporting"}
    outcome = receiver.recv()
    child.join()
    return outcome


def _child_main(job: dict, sender) -> None:
    try:
        sender.send(_train(job))
    except Exception as e:  # report to the parent rather than dying silently
        sender.send({"error": f"{type(e).__name__}: {e}"})


def _train(job: dict) -> dict:
    from workers.engine.codecs import make_codec
    from workers.engine.models import build_model
    from workers.engine.runner import make_replica, train_plans
    from workers.engine.spec import Spec

    spec = Spec.from_dict(job["spec"])
    first = job["data"][0]
    model = build_model(spec.model, first.input_shape, first.num_classes)
    replicas = [
        make_replica(spec, model, torch.device(d), data, job["vectorised"])
        for d, data in zip(job["devices"], job["data"], strict=True)
    ]
    for replica, scale in zip(replicas, job["scales"], strict=True):
        replica.trainer.scaler.scale = scale
    layout = [p.numel() for p in model.parameters()]
    uplink = make_codec(spec.communication.uplink, layout, spec.communication.topk_ratio)
    stats = train_plans(replicas, job["plans"], job["received"], uplink, job["residuals"], job["acc"])
    out = {k: float(v) for k, v in stats.items()}
    out["scales"] = [r.trainer.scaler.scale for r in replicas]
    return out
