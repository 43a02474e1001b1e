"""Which clients a vectorised step trains and whether a model may be vectorised at all: the step's
active window of slots (client.py's VectorTrainer reads it each step) and the model checks that
training.py and capacity.py ask before choosing vmap."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedweb_engine.training.plan import bucket


def active_windows(active: torch.Tensor, *, bucketed: bool = True) -> list[tuple[int, int, bool]]:
    """For each step, a slot range [lo, hi) holding every client still active at that step, and
    whether every slot in it is active (``full``: the step's masks are all ones).

    ``active`` is the plan's [slots, T] host mask. Bucketed, the range has a power-of-two length
    (see :func:`fedweb_engine.training.plan.bucket`), so the set of shapes stays bounded: what compiled
    steps and the CUDA caching allocator need. Not bucketed, it is exactly the active clients'
    span: eager vmap on a CPU gains nothing from bounded shapes, and a power-of-two window
    computes about a third more client rows than the active ones on cohorts of mixed sizes
    (measured on the memory report's workload: 1.36x), each a full forward and backward.
    """
    columns = active.t().bool().numpy()  # a host tensor: read once per group, no device sync
    slots = columns.shape[1]
    windows = []
    for column in columns:
        found = np.flatnonzero(column)
        if len(found) == 0:
            windows.append((0, bucket(1, slots) if bucketed else 1, False))
            continue
        first, last = int(found[0]), int(found[-1]) + 1
        size = bucket(last - first, slots) if bucketed else last - first
        lo = max(0, last - size)
        windows.append((lo, lo + size, len(found) == size))
    return windows


def can_vectorise(model: nn.Module) -> bool:
    """Whether vmap may train ``model``: it says so, or says nothing (a plugin's model, probed when
    the simulation starts: see :mod:`fedweb_engine.training.vmap_probe`) and has no buffers."""
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
