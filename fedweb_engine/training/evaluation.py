"""Evaluation of the global model: loss and accuracy over a whole tensor of samples."""

from __future__ import annotations

import math

import numpy as np
import torch

from fedweb_engine.data.base import as_input
from fedweb_engine.results.round_result import accuracy_fields
from fedweb_engine.training.client import task_loss


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


@torch.no_grad()
def evaluate_clients(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    offsets: torch.Tensor,
    clients: torch.Tensor,
    *,
    batch_size: int,
    device: torch.device,
) -> torch.Tensor:
    """Accuracy of ``model`` on each of ``clients``' own test rows (``offsets`` index ``x``/``y``
    per client), as a CPU tensor; NaN for a client without test rows.

    The clients' rows are read in large batches across clients (not one small pass per client)
    and hits are summed per client on the device: one host sync per call.
    """
    starts, ends = offsets[clients], offsets[clients + 1]
    sizes = ends - starts
    rows = torch.cat([torch.arange(int(s), int(e)) for s, e in zip(starts, ends, strict=True)] or [torch.zeros(0)])
    owner = torch.repeat_interleave(torch.arange(len(clients)), sizes).to(device)
    correct = torch.zeros(len(clients), device=device)
    rows = rows.long()
    for i in range(0, len(rows), batch_size):
        idx = rows[i : i + batch_size].to(x.device)
        xb = as_input(x[idx].to(device, non_blocking=True))
        yb = y[idx].to(device, non_blocking=True)
        hits = (model(xb).argmax(dim=-1) == yb).float()
        correct.index_add_(0, owner[i : i + batch_size], hits.mean(dim=-1) if yb.dim() > 1 else hits)
    accuracy = correct.cpu() / sizes.clamp(min=1).float()
    return torch.where(sizes > 0, accuracy, torch.nan)


def client_evaluation(model: torch.nn.Module, data, clients: torch.Tensor | None, spec) -> dict:
    """The client_accuracy_* fields of a round: the global model on ``clients``' own test splits
    (none when federated evaluation is off or the data has no per-client test splits)."""
    if clients is None or data.client_test_offsets is None:
        return {}
    accuracies = evaluate_clients(
        model,
        data.x_client_test,
        data.y_client_test,
        data.client_test_offsets,
        clients,
        batch_size=spec.evaluation.batch_size,
        device=next(model.parameters()).device,
    )
    return accuracy_fields(accuracies.tolist())


def evaluation_cohort(spec, num_clients: int) -> torch.Tensor | None:
    """The fixed evaluation cohort (evaluation.clients == "cohort"), drawn once from its own stream."""
    if spec.evaluation.clients != "cohort":
        return None
    rng = np.random.default_rng([spec.seed, 3])
    chosen = rng.choice(num_clients, size=spec.evaluation.cohort_size, replace=False)
    return torch.from_numpy(np.sort(chosen))
