"""The state every server strategy keeps: P-sized fp32 buffers, allocated once, and their checkpoint
round trip. The base of both kinds of strategy (``FedAvg`` for the streaming protocol,
``RobustStrategy`` for the whole-cohort one), which differ only in what ``step`` receives."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class StrategyState:
    """Preallocated optimizer buffers (memory stays flat across rounds) that checkpoints carry."""

    name = "strategy"

    def __init__(self, *, num_params: int, device: torch.device | str, lr: float = 1.0, options: Any = None):
        self.num_params = num_params
        self.device = torch.device(device)
        self.lr = lr
        self.options = options  # the registered options dataclass (None when built by hand)
        self._state: dict[str, Tensor] = {}

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
