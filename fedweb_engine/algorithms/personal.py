"""Federated evaluation of personal models (Ditto): each client's own model on its own test rows."""

from __future__ import annotations

import copy

import torch

from fedweb_engine.algorithms.base import StateStore
from fedweb_engine.results.round_result import personal_accuracy_fields
from fedweb_engine.training.evaluation import evaluate_clients
from fedweb_engine.training.flat import bind_flat


@torch.no_grad()
def personal_evaluation(
    model: torch.nn.Module, global_flat: torch.Tensor, data, clients: torch.Tensor | None, store: StateStore, spec
) -> dict:
    """The personal_accuracy_* fields of a round, measured on the personal models of ``clients``
    (a client never trained holds none yet: the global model stands in for it, as Ditto starts
    personal models from it). Empty when federated evaluation is off."""
    if clients is None or data.client_test_offsets is None:
        return {}
    device = global_flat.device
    personal = copy.deepcopy(model)
    flat = torch.empty_like(global_flat)
    bind_flat(personal, flat)
    P = flat.numel()
    rows = store.gather(clients, device)
    accuracies = []
    for i, c in enumerate(clients.tolist()):
        flat.copy_(torch.where(rows[i, P] > 0, rows[i, :P], global_flat))
        one = torch.tensor([c], dtype=torch.int64)
        acc = evaluate_clients(
            personal,
            data.x_client_test,
            data.y_client_test,
            data.client_test_offsets,
            one,
            batch_size=spec.evaluation.batch_size,
            device=device,
        )
        accuracies.append(float(acc[0]))
    return personal_accuracy_fields(accuracies)
