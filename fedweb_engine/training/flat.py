"""The flat weight buffer the trainers and the runner share: its layout, a model bound to it, the
per-parameter views of a group's rows, and what a group's training leaves behind.

A model's P parameters live in one flat vector (``[P]``, or ``[G, P]`` for a group of clients), so
copying weights in or out, encoding an update and aggregating are each one operation on P floats.
Nothing here carries the learning rate: the update rules are client.py's.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GroupOutput:
    """What a group's training leaves behind; all on the device, read once per round."""

    delta: torch.Tensor  # [slots, P] w_client - w_start (padding rows are zero and carry weight 0)
    loss_sum: torch.Tensor  # [slots] summed batch losses
    steps: torch.Tensor  # [slots] steps taken
    samples: torch.Tensor  # [] samples processed


def flat_layout(model: nn.Module) -> tuple[list[str], list[torch.Size], list[int]]:
    """The parameters' names, shapes and sizes, in the flat buffer's order."""
    names, shapes, sizes = [], [], []
    for name, p in model.named_parameters():
        names.append(name)
        shapes.append(p.shape)
        sizes.append(p.numel())
    return names, shapes, sizes


def bind_flat(model: nn.Module, flat: torch.Tensor) -> None:
    """Make ``model``'s parameters views into ``flat`` (copying their current values in).

    Afterwards ``flat`` *is* the model: copying weights in or out is one ``copy_`` of P floats.
    """
    offset = 0
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            n = p.numel()
            view = flat[offset : offset + n].view(p.shape)
            view.copy_(p.detach())
            module._parameters[name] = nn.Parameter(view, requires_grad=p.requires_grad)
            offset += n
    if offset != flat.numel():
        raise ValueError(f"flat buffer has {flat.numel()} entries, model has {offset}")


def param_views(
    w: torch.Tensor, names: list[str], shapes: list[torch.Size], sizes: list[int]
) -> dict[str, torch.Tensor]:
    """Each parameter of the clients ``w`` [n, P] as a view ``[n, *shape]`` into ``w``: writing into
    a view writes the flat rows (no copy either way)."""
    parts = w.split(sizes, dim=1)
    return {name: part.view(w.shape[0], *shape) for name, part, shape in zip(names, parts, shapes, strict=True)}


def autocast(device: torch.device, precision: str):
    """The autocast context of ``precision`` on ``device`` (none for fp32)."""
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)
