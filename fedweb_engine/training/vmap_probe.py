"""Whether ``torch.func.vmap`` can train a model that does not say (a plugin's, ``vmappable=None``).

Built-in models declare ``vmappable = True`` on their class and are never probed. A model that
declares nothing is tried once per simulation: one vectorised gradient step, exactly the one the
:class:`~fedweb_engine.training.client.VectorTrainer` takes, on two clients holding the first real rows of
the data. Any exception means sequential training, with the reason in the experiment's log; asking
the user to mark their model by hand would only move the same discovery to a failed round.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.spec.schema import LocalSpec
from fedweb_engine.training.client import VectorTrainer

PROBE_CLIENTS = 2
PROBE_ROWS = 2
MAX_REASON = 300


def declared_vmappable(model: nn.Module, name: str) -> bool | None:
    """What the model says (its ``vmappable`` attribute), else its registration's ``vmappable``
    trait, else None: unknown, so it is probed."""
    value = getattr(model, "vmappable", None)
    if value is not None:
        return bool(value)
    try:
        trait = registry.get("model", name).traits.get("vmappable")
    except registry.UnknownComponent:
        return None
    return None if trait is None else bool(trait)


def has_buffers(model: nn.Module) -> bool:
    return any(True for _ in model.buffers())


def probe(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device, precision: str = "fp32"
) -> str | None:
    """None when a vectorised step runs on ``model`` in ``precision``; otherwise why not ("TypeError: ...").

    ``x``/``y`` are a few training rows (as stored); the model itself is not touched. Only the
    gradient is computed, never a step: the spec's local section has no say (a default one is given).
    """
    if has_buffers(model):
        # BatchNorm's running statistics are updated in place, once per batch; under vmap every
        # client would need its own copy, which functional_call over the parameters does not give.
        return "it has buffers (e.g. BatchNorm running statistics), which are not trained per client"
    try:
        trainer = VectorTrainer(
            copy.deepcopy(model).to(device), PROBE_CLIENTS, LocalSpec(), device, precision=precision
        )
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).to(device)
        w = flat.expand(PROBE_CLIENTS, -1).clone()
        xs = x[:PROBE_ROWS].to(device).expand(PROBE_CLIENTS, *x[:PROBE_ROWS].shape)
        ys = y[:PROBE_ROWS].to(device).expand(PROBE_CLIENTS, *y[:PROBE_ROWS].shape)
        mask = torch.ones(PROBE_CLIENTS, len(ys[0]), device=device)
        grads, _loss = trainer.gradients(w, xs, ys, mask)
        if grads.shape != w.shape:
            return f"its vectorised gradient has shape {tuple(grads.shape)}, not {tuple(w.shape)}"
    except Exception as e:  # anything a model's forward can raise under vmap
        text = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"{type(e).__name__}: {text[:MAX_REASON]}".rstrip(": ")
    return None
