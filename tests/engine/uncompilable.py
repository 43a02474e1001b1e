"""A model that trains vectorised but cannot be compiled, as a plugin's can be: its forward calls a
custom operator that has a batching rule (vmap runs it) but no fake implementation, which tracing
for compilation needs (``torch.library``'s message says so)."""

import math

import torch
from torch import nn

from fedweb_engine.components import registry

NAME = "uncompilable"


@torch.library.custom_op("fedweb_tests::unit_range", mutates_args=())
def unit_range(x: torch.Tensor) -> torch.Tensor:
    return x.clamp(0, 1)


@unit_range.register_vmap
def _unit_range_batched(info, in_dims, x):
    return unit_range(x), in_dims[0]


class Uncompilable(nn.Module):
    vmappable = True

    def __init__(self, features: int, classes: int):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return self.fc(unit_range(x.flatten(1)))


def register() -> str:
    registry.model(NAME, vmappable=True)(lambda shape, classes, options: Uncompilable(math.prod(shape), classes))
    return NAME


def unregister() -> None:
    registry.unregister("model", NAME)
