"""FedAvg (McMahan et al. 2017) on the server: w ← w + η_s · Δ̄.

Also the base of every server strategy here: it owns the flat fp32 state buffers (preallocated at
construction, so memory stays flat across rounds) and their checkpoint round trip.
"""

from __future__ import annotations

import torch
from torch import Tensor

from fedweb_engine.components import registry


class FedAvg:
    """Server SGD on the averaged update Δ̄ with learning rate ``lr`` (1.0 is plain averaging)."""

    name = "fedavg"

    def __init__(self, *, num_params: int, device: torch.device | str, lr: float = 1.0):
        self.num_params = num_params
        self.device = torch.device(device)
        self.lr = lr
        self._state: dict[str, Tensor] = {}

    def step(self, global_flat: Tensor, avg_update: Tensor) -> None:
        """Apply the round's weighted-average update ``avg_update`` to ``global_flat`` in place."""
        global_flat.add_(avg_update, alpha=self.lr)

    def state_dict(self) -> dict[str, Tensor]:
        """Every optimizer state tensor, by name (the buffers themselves, not copies)."""
        return dict(self._state)

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Copy ``state`` into the preallocated buffers, so a checkpoint resumes exactly."""
        if set(state) != set(self._state):
            raise ValueError(f"{self.name}: state has {sorted(state)}, expected {sorted(self._state)}")
        for key, buffer in self._state.items():
            if state[key].shape != buffer.shape:
                raise ValueError(
                    f"{self.name}: state {key} has shape {list(state[key].shape)}, expected {list(buffer.shape)}"
                )
            buffer.copy_(state[key])

    def _buffer(self, name: str, fill: float = 0.0) -> Tensor:
        """A state buffer of P fp32 entries on the device, kept in :meth:`state_dict`."""
        self._state[name] = torch.full((self.num_params,), fill, dtype=torch.float32, device=self.device)
        return self._state[name]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_params={self.num_params}, lr={self.lr})"


@registry.strategy("fedavg")
def fedavg(*, num_params: int, device: torch.device | str, lr: float, options) -> FedAvg:
    """FedAvg: server SGD on the clients' weighted-average update."""
    return FedAvg(num_params=num_params, device=device, lr=lr)
