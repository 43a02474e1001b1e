"""The VGG-like CNN of TFF's "High-performance simulations with accelerators" tutorial: cnn-(6·blocks+2)-width.

Layers (``w`` = width, every conv 3×3, 'same' padding, no bias, each followed by ReLU)::

    per-image standardisation (no parameters)
    stem     conv in→16w
    stage 1  `blocks` basic blocks of 2 convs at 16w, stride 1
    stage 2  `blocks` basic blocks of 2 convs at 32w; the first conv has stride 2
    stage 3  `blocks` basic blocks of 2 convs at 64w; the first conv has stride 2
    global average pool → Linear(64w, num_classes) with bias

The name counts weight layers: 1 stem conv + 3 stages × blocks × 2 convs + 1 dense = 6·blocks + 2.
On (1,28,28) with 10 classes, cnn-14-4 (blocks=2, width=4) has 2,731,082 parameters and cnn-26-4
(blocks=4) 5,827,658; the two extra blocks per stage add 4·9·(64²+128²+256²) = 3,096,576.
Initialisation follows the Keras original: he-normal (truncated) convs, glorot-uniform dense, zero bias.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


def _conv(c_in: int, c_out: int, stride: int) -> nn.Conv2d:
    return nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)


def per_image_standardization(x: torch.Tensor) -> torch.Tensor:
    """``tf.image.per_image_standardization``: zero mean, unit variance per image, std floored at 1/√N."""
    n = x[0].numel()
    mean = x.mean(dim=(1, 2, 3), keepdim=True)
    std = x.std(dim=(1, 2, 3), keepdim=True, correction=0)
    return (x - mean) / std.clamp(min=1.0 / math.sqrt(n))


class VGG(nn.Module):
    """cnn-(6·blocks+2)-width; returns logits [B, num_classes]."""

    vmappable = True

    def __init__(self, input_shape: tuple[int, ...], num_classes: int, blocks: int = 2, width: int = 4):
        super().__init__()
        self.name = f"cnn-{6 * blocks + 2}-{width}"
        layers: list[nn.Module] = [_conv(input_shape[0], 16 * width, 1), nn.ReLU()]
        c_in = 16 * width
        for stage, stride in enumerate((1, 2, 2)):
            c_out = 16 * width * 2**stage
            for i in range(2 * blocks):
                layers += [_conv(c_in, c_out, stride if i == 0 else 1), nn.ReLU()]
                c_in = c_out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(c_in, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(per_image_standardization(x))
        return self.head(x.mean(dim=(2, 3)))

    def init_parameters(self, generator: torch.Generator | None = None) -> None:
        for m in self.features.modules():
            if isinstance(m, nn.Conv2d):
                # Keras he_normal: truncated at 2σ, σ rescaled so the truncated variance is 2/fan_in.
                std = math.sqrt(2.0 / m.weight[0].numel()) / 0.87962566103423978
                nn.init.trunc_normal_(m.weight, std=std, a=-2 * std, b=2 * std, generator=generator)
        nn.init.xavier_uniform_(self.head.weight, generator=generator)
        nn.init.zeros_(self.head.bias)


@dataclass(frozen=True)
class VGGOptions:
    blocks: int = option(2, "VGG blocks: cnn-(6·blocks+2)-width.", min=1, max=8)
    width: int = option(4, "VGG width multiplier.", min=1, max=64, size=True)


@registry.model("vgg", VGGOptions, vmappable=True)
def vgg(input_shape: tuple[int, ...], num_classes: int, options: VGGOptions) -> VGG:
    """The VGG-like cnn-(6·blocks+2)-width of the TFF accelerator report."""
    return VGG(input_shape, num_classes, blocks=options.blocks, width=options.width)
