"""Evaluation of the global model: loss and accuracy over a whole tensor of samples."""

from __future__ import annotations

import math

import torch

from workers.engine.client import task_loss
from workers.engine.data.base import as_input


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int, device: torch.device
) -> tuple[float, float]:
    """Mean loss and accuracy of ``model`` on ``(x, y)``, in batches; NaNs when there are no samples.

    Sums stay on the device and are read once at the end, so a GPU is synchronised once per call.
    For sequence targets (``y`` of rank 2) accuracy is the mean over each sequence's tokens.
    """
    n = len(y)
    if n == 0:
        return math.nan, math.nan
    loss = torch.zeros((), device=device)
    correct = torch.zeros((), device=device)
    for i in range(0, n, batch_size):
        xb = as_input(x[i : i + batch_size].to(device, non_blocking=True))
        yb = y[i : i + batch_size].to(device, non_blocking=True)
        out = model(xb)
        loss += task_loss(out, yb).sum()
        hits = (out.argmax(dim=-1) == yb).float()
        correct += hits.mean(dim=-1).sum() if yb.dim() > 1 else hits.sum()
    return float(loss) / n, float(correct) / n
