"""FedAvgM (Hsu et al. 2019): server momentum. m ← β·m + Δ̄; w ← w + η_s · m."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.strategies.fedavg import FedAvg


class FedAvgM(FedAvg):
    """Server SGD with heavy-ball momentum ``momentum`` (β) on the averaged update."""

    name = "fedavgm"

    def __init__(self, *, num_params: int, device: torch.device | str, lr: float = 1.0, momentum: float = 0.9):
        super().__init__(num_params=num_params, device=device, lr=lr)
        self.momentum = momentum
        self.m = self._buffer("momentum")

    def step(self, global_flat: Tensor, avg_update: Tensor) -> None:
        self.m.mul_(self.momentum).add_(avg_update)
        global_flat.add_(self.m, alpha=self.lr)


@dataclass(frozen=True)
class FedAvgMOptions:
    momentum: float = option(0.9, "Server momentum for FedAvgM.", min=0, max=0.999)


@registry.strategy("fedavgm", FedAvgMOptions, moments=1)
def fedavgm(*, num_params, device, lr: float, options: FedAvgMOptions) -> FedAvgM:
    """FedAvgM: server SGD with heavy-ball momentum."""
    return FedAvgM(num_params=num_params, device=device, lr=lr, momentum=options.momentum)
