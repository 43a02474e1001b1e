"""Aggregation as pure functions over client updates (Flower style), for whole or streamed cohorts.

Weights are the clients' sample counts. A masked client (dropped, straggler) carries weight 0.
Nothing here syncs with the host, so the functions run unchanged on CUDA tensors.
"""

from __future__ import annotations

import torch
from torch import Tensor


def weighted_average(updates: Tensor, weights: Tensor) -> Tensor:
    """Σ_i w_i Δ_i / Σ_i w_i over ``updates`` ``[K, P]`` and ``weights`` ``[K]``; zeros if Σ w = 0."""
    weights = weights.to(updates.dtype)
    out = updates.new_zeros(updates.shape[1])
    accumulate_(out, updates, weights)
    return divide_by_total_(out, weights.sum())


def accumulate_(acc: Tensor, updates: Tensor, weights: Tensor) -> None:
    """``acc += weights @ updates`` in place, for one group ``[G, P]`` of a streamed cohort.

    Lets the runner fold each group into one ``[P]`` sum instead of holding all K updates.
    Note 0 · NaN = NaN: a masked client's row must hold finite numbers (e.g. zeros).
    """
    acc.addmv_(updates.t(), weights.to(updates.dtype))


def divide_by_total_(acc: Tensor, total_weight: Tensor) -> Tensor:
    """Turn an accumulated weighted sum into the average, in place; zero total weight leaves zeros.

    ``total_weight`` is a tensor on the device (no ``.item()``): where it is 0, ``acc`` is 0 too
    (every weight was 0), so dividing by 1 instead keeps the result 0 without a host branch.
    """
    total = torch.as_tensor(total_weight, dtype=acc.dtype, device=acc.device)
    return acc.div_(torch.where(total > 0, total, torch.ones_like(total)))
