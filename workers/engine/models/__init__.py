"""The model registry: ``build_model(spec, input_shape, num_classes)`` for every name in ``spec.MODELS``.

Every model class has ``vmappable: bool``: True when it can be trained with
``torch.func.vmap(grad(...))`` over stacked parameters through ``functional_call``. None of the
models has BatchNorm, dropout, buffers or data-dependent control flow, so all of them are.

Initialisation is deterministic: a model is built on the meta device, then its ``init_parameters``
fills every parameter from ``generator`` (or from torch's global RNG when ``generator`` is None), so
the same generator state always gives identical weights and a passed generator leaves the global
RNG untouched.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from workers.engine.models.cnn import CNN
from workers.engine.models.flops import flops_per_sample
from workers.engine.models.lm import LM14M
from workers.engine.models.logistic import Logistic
from workers.engine.models.mlp import MLP
from workers.engine.models.vgg import VGG
from workers.engine.spec import ModelSpec

__all__ = ["MODELS", "build_model", "count_params", "flops_per_sample"]


def _lm14m(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
    # Shape and vocabulary are fixed by the architecture; input_shape is (T,) and num_classes unused.
    return LM14M()


# name → constructor(spec, input_shape, num_classes) returning an *uninitialised* module.
MODELS: dict[str, Callable[[ModelSpec, tuple[int, ...], int], nn.Module]] = {
    "logistic": lambda spec, shape, classes: Logistic(shape, classes),
    "mlp": lambda spec, shape, classes: MLP(shape, classes, hidden=spec.hidden),
    "cnn": lambda spec, shape, classes: CNN(shape, classes),
    "vgg": lambda spec, shape, classes: VGG(shape, classes, blocks=spec.blocks, width=spec.width),
    "lm14m": _lm14m,
}


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
    if spec.name not in MODELS:
        raise ValueError(f"unknown model {spec.name!r}; expected one of {', '.join(MODELS)}")
    # Meta construction allocates nothing and draws no random numbers; init_parameters does both once.
    with torch.device("meta"):
        model = MODELS[spec.name](spec, tuple(input_shape), num_classes)
    model.to_empty(device="cpu")
    model.init_parameters(generator)
    return model


def count_params(model: nn.Module) -> int:
    """Number of scalar parameters (trainable or not)."""
    return sum(p.numel() for p in model.parameters())
