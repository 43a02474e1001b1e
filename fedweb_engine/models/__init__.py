"""Building models: ``build_model(spec, input_shape, num_classes)`` for every registered model.

The built-in models register in their own modules (``@registry.model``), as a plugin's do. Every
built-in class has ``vmappable: bool``: True when it can be trained with
``torch.func.vmap(grad(...))`` over stacked parameters through ``functional_call``.

Initialisation is deterministic. A built-in is constructed on the meta device, then its
``init_parameters`` fills every parameter from ``generator`` (or from torch's global RNG when
``generator`` is None). A module without ``init_parameters`` (a plugin's) is built on the CPU
under ``torch.random.fork_rng()`` seeded from ``generator``: the same generator state gives the
same weights, and a passed generator leaves the global RNG untouched either way.
"""

from __future__ import annotations

import torch
from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.models.flops import flops_per_sample
from fedweb_engine.spec.schema import ModelSpec

__all__ = ["build_model", "construct", "count_params", "flops_per_sample"]


def construct(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    """The registered factory's module for ``spec`` (uninitialised when built under ``torch.device("meta")``)."""
    component = registry.get("model", spec.name)
    model = component.factory(tuple(input_shape), num_classes, spec.options)
    if not isinstance(model, nn.Module):
        raise TypeError(f"model {spec.name!r} returned {type(model).__name__}, not a torch.nn.Module")
    if component.traits.get("vmappable") is not None and not hasattr(type(model), "vmappable"):
        model.vmappable = component.traits["vmappable"]
    return model


def build_model(
    spec: ModelSpec,
    input_shape: tuple[int, ...],
    num_classes: int,
    *,
    generator: torch.Generator | None = None,
) -> nn.Module:
    """Build and initialise ``spec.name`` on the CPU for samples of ``input_shape`` (no batch dim).

    Image models take float [B, C, H, W]; ``logistic`` and ``mlp`` flatten any shape; ``lm14m`` takes
    int64 tokens [B, T] and returns [B, T, 50304]. Weights come from ``generator`` (a CPU generator),
    or from the global RNG when it is None. Move the model to its device afterwards.
    """
    if registry.get("model", spec.name).builtin:
        # Meta construction allocates nothing and draws no random numbers; init_parameters does both once.
        with torch.device("meta"):
            model = construct(spec, input_shape, num_classes)
        model.to_empty(device="cpu")
        model.init_parameters(generator)
        return model
    if generator is None:
        return construct(spec, input_shape, num_classes)
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = construct(spec, input_shape, num_classes)
    if hasattr(model, "init_parameters"):
        model.init_parameters(generator)
    return model


def count_params(model: nn.Module) -> int:
    """Number of scalar parameters (trainable or not)."""
    return sum(p.numel() for p in model.parameters())
