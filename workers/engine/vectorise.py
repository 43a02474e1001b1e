"""Which clients a vectorised step trains and whether a model may be vectorised at all: the step's
active window of slots (client.py's VectorTrainer reads it each step) and the model checks that
training.py and capacity.py ask before choosing vmap."""

from __future__ import annotations

import torch
from torch import nn

from workers.engine.plan import bucket


def active_windows(active: torch.Tensor) -> list[tuple[int, int]]:
    """For each step, a slot range [lo, hi) holding every client still active at that step.

    ``active`` is the plan's [slots, T] host mask. The range has a power-of-two length (see
    :func:`workers.engine.plan.bucket`), so the set of shapes stays bounded.
    """
    slots = active.shape[0]
    windows = []
    for column in active.t().bool():
        found = column.nonzero()
        if len(found) == 0:
            windows.append((0, bucket(1, slots)))
            continue
        first, last = int(found[0]), int(found[-1]) + 1
        size = bucket(last - first, slots)
        lo = max(0, last - size)
        windows.append((lo, lo + size))
    return windows


def can_vectorise(model: nn.Module) -> bool:
    """Whether vmap may train ``model``: it says so, or says nothing (a plugin's model, probed when
    the simulation starts: see :mod:`workers.engine.vmap_probe`) and has no buffers."""
    declared = getattr(model, "vmappable", None)
    if declared is None:
        return not any(True for _ in model.buffers())
    return bool(declared)


def vectorises_well_on_cpu(model: nn.Module) -> bool:
    """Dense feed-forward models: on a CPU, vmap makes convolutions grouped (slow in oneDNN); a
    language model vectorises (its attention is written out) but has not been measured faster
    vectorised on a CPU; so both train one by one there (on a GPU they are vectorised)."""
    has_conv = any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())
    return not has_conv and not getattr(model, "takes_tokens", False)
