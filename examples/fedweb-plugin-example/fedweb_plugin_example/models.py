"""``resnet_small``: a residual CNN for small images, trainable with torch.func.vmap.

No BatchNorm: its running statistics are buffers, which FedWeb cannot train per client in one
vectorised step. GroupNorm normalises each sample on its own and has no buffers, so it vmaps.
"""

from dataclasses import dataclass

from torch import nn

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@dataclass(frozen=True)
class ResNetOptions:
    width: int = option(16, "Channels of every block.", min=4, max=256)
    blocks: int = option(2, "Residual blocks.", min=1, max=8)


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.conv1 = nn.Conv2d(width, width, 3, padding=1)
        self.norm = nn.GroupNorm(1, width)  # one group: valid for any width
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)

    def forward(self, x):
        return x + self.conv2(nn.functional.relu(self.norm(self.conv1(x))))


class ResNetSmall(nn.Module):
    def __init__(self, channels: int, num_classes: int, width: int, blocks: int):
        super().__init__()
        self.stem = nn.Conv2d(channels, width, 3, padding=1)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(blocks)))
        self.head = nn.Linear(width, num_classes)

    def forward(self, x):
        h = self.blocks(nn.functional.relu(self.stem(x)))
        return self.head(h.mean(dim=(2, 3)))  # global average pooling: any image size


@registry.model("resnet_small", ResNetOptions, vmappable=True)
def resnet_small(input_shape, num_classes, options):
    """A small residual CNN: a stem, ``blocks`` residual blocks of ``width`` channels, a linear head."""
    if len(input_shape) != 3:
        raise ValueError(f"resnet_small needs images [C, H, W], not samples of shape {tuple(input_shape)}")
    return ResNetSmall(input_shape[0], num_classes, options.width, options.blocks)
