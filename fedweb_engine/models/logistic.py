"""Multinomial logistic regression: the 784→10 softmax model of TFF's image-classification tutorial."""

from __future__ import annotations

import math

import torch
from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.models.init import torch_default_init


class Logistic(nn.Module):
    """One Linear layer on the flattened input; returns logits [B, num_classes]."""

    vmappable = True

    def __init__(self, input_shape: tuple[int, ...], num_classes: int):
        super().__init__()
        self.linear = nn.Linear(math.prod(input_shape), num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.flatten(1))

    def init_parameters(self, generator: torch.Generator | None = None) -> None:
        torch_default_init(self, generator)


@registry.model("logistic", vmappable=True)
def logistic(input_shape: tuple[int, ...], num_classes: int, options) -> Logistic:
    """Multinomial logistic regression on the flattened input."""
    return Logistic(input_shape, num_classes)
