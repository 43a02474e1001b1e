"""The 2NN of the FedAvg paper (McMahan et al. 2017): two hidden ReLU layers on the flattened input."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.models.init import torch_default_init


class MLP(nn.Module):
    """flatten → Linear(hidden) → ReLU → Linear(hidden) → ReLU → Linear(num_classes)."""

    vmappable = True

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, hidden: int = 200):
        super().__init__()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(math.prod(input_shape), hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def init_parameters(self, generator: torch.Generator | None = None) -> None:
        torch_default_init(self, generator)


@dataclass(frozen=True)
class MLPOptions:
    hidden: int = option(200, "Hidden units of the mlp.", min=1, max=65_536, size=True)


@registry.model("mlp", MLPOptions, vmappable=True)
def mlp(input_shape: tuple[int, ...], num_classes: int, options: MLPOptions) -> MLP:
    """The 2NN of the FedAvg paper: two hidden ReLU layers."""
    return MLP(input_shape, num_classes, hidden=options.hidden)
