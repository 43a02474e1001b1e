"""The 2-conv CNN of TFF's EMNIST baselines, as used for FEMNIST in Reddi et al. (2021).

Conv(in,32,3) ReLU → Conv(32,64,3) ReLU → MaxPool 2 → flatten → Linear(·,128) ReLU → Linear(128,classes).
The original's dropout layers are left out so the forward pass is deterministic (and vmappable).
(1,28,28) with 62 classes: 1,206,590 parameters; (3,32,32) with 10 classes: 1,626,442 (pfl-research's
CIFAR10 CNN, whose source gives exactly this count).
"""

from __future__ import annotations

import torch
from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.models.init import torch_default_init


class CNN(nn.Module):
    """Two unpadded 3×3 convs, one 2×2 max-pool, a 128-unit dense layer; returns logits."""

    vmappable = True

    def __init__(self, input_shape: tuple[int, ...], num_classes: int):
        super().__init__()
        channels, height, width = input_shape
        # Two valid 3×3 convs take 4 pixels off each side length, then the pool halves it.
        flat = 64 * ((height - 4) // 2) * ((width - 4) // 2)
        self.net = nn.Sequential(
            nn.Conv2d(channels, 32, 3),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(flat, 128),
            nn.ReLU(),
            nn.Linear(128, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def init_parameters(self, generator: torch.Generator | None = None) -> None:
        torch_default_init(self, generator)


@registry.model("cnn", vmappable=True)
def cnn(input_shape: tuple[int, ...], num_classes: int, options) -> CNN:
    """The FEMNIST CNN of the FedAvg paper (two 5×5 convolutions, 2048 hidden units)."""
    return CNN(input_shape, num_classes)
