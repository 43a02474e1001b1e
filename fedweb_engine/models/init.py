"""Weight initialisers that draw from an explicit ``torch.Generator``.

Models are built on the meta device and initialised here, so initialisation never depends on the
order in which layers happen to be constructed, and a caller that passes a generator leaves the
global RNG untouched. ``generator=None`` means torch's global RNG (seed it with ``torch.manual_seed``).
"""

from __future__ import annotations

import math

import torch
from torch import nn


def torch_default_init(model: nn.Module, generator: torch.Generator | None) -> None:
    """PyTorch's own default init for Linear/Conv (kaiming-uniform, a=√5), but from ``generator``."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=generator)
            if m.bias is not None:
                fan_in = m.weight[0].numel()
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                nn.init.uniform_(m.bias, -bound, bound, generator=generator)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
