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


def step_windows(active: torch.Tensor, *, bucketed: bool, pieces: bool = False) -> list[tuple[int, int, int, bool]]:
    """The windows the trainer computes, ``(step, lo, hi, full)``, in step order: one per step
    (:func:`active_windows`) or, with ``bucketed`` and ``pieces``, up to two power-of-two windows
    per step that cover its active span without overlapping (:func:`split_window`).

    Why pieces: a single power-of-two window computes ~1.29x the active rows on cohorts of mixed
    sizes (the memory report's workload), which a compiled step on a CPU pays in full; two
    windows compute 1.07x for 1.4x the calls. On a GPU, where a call's launch costs more than
    idle rows, one window a step stays.
    """
    slots = active.shape[0]
    exact = active_windows(active, bucketed=False)
    if not bucketed:
        return [(t, lo, hi, full) for t, (lo, hi, full) in enumerate(exact)]
    columns = active.t().bool().numpy()
    out = []
    for t, (lo, hi, _full) in enumerate(exact):
        spans = split_window(lo, hi, slots) if pieces else None
        for a, b in spans or [_single(lo, hi, slots)]:
            out.append((t, a, b, bool(columns[t, a:b].all())))
    return out


def split_window(lo: int, hi: int, slots: int) -> list[tuple[int, int]] | None:
    """Two power-of-two windows, inside ``[0, slots)`` and not overlapping, covering ``[lo, hi)``: the
    largest power of two that fits, then the rest padded to a power of two, below or above it.
    None when one window is as good (the span is a power of two, or padding the rest costs as
    much) or the pieces do not fit."""
    n = hi - lo
    big = 1 << (n.bit_length() - 1)
    rest = n - big
    if rest == 0 or bucket(rest, slots) >= big:
        return None
    pad = bucket(rest, slots)
    if lo + rest - pad >= 0:  # the rest at the bottom, padded downwards
        return [(lo + rest - pad, lo + rest), (lo + rest, hi)]
    if lo + big + pad <= slots:  # the rest above the big piece, padded upwards
        return [(lo, lo + big), (lo + big, lo + big + pad)]
    return None


def _single(lo: int, hi: int, slots: int) -> tuple[int, int]:
    size = bucket(max(1, hi - lo), slots)
    start = max(0, hi - size)
    return start, start + size


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
