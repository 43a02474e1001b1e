"""FedAvg (McMahan et al. 2017) on the server: w ← w + η_s · Δ̄.

Also the base of every streaming strategy here (FedAvgM, FedProx, FedAdam, …): the buffers and
their checkpoint round trip are :class:`~fedweb_engine.strategies.state_buffers.StrategyState`'s.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fedweb_engine.strategies.state_buffers import StrategyState


class FedAvg(StrategyState):
    """Server SGD on the averaged update Δ̄ with learning rate ``lr`` (1.0 is plain averaging).

    A :class:`~fedweb_engine.components.contracts.StreamingStrategy`, and the base to subclass for
    one: override :meth:`step`, allocate state with ``_buffer``."""

    name = "fedavg"

    def step(self, global_flat: Tensor, avg_update: Tensor) -> None:
        """Apply the round's weighted-average update ``avg_update`` to ``global_flat`` in place."""
        global_flat.add_(avg_update, alpha=self.lr)


def fedavg(*, num_params: int, device: torch.device | str, lr: float, options) -> FedAvg:
    """FedAvg: server SGD on the clients' weighted-average update."""
    return FedAvg(num_params=num_params, device=device, lr=lr)
