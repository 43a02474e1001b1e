"""``fedavg_clipped``: FedAvg whose server step is clipped to a maximum L2 norm.

A round in which a few clients send huge updates (a bad local learning rate, corrupted data) then
moves the global model by at most ``server_lr * max_norm``. The norm is compared on the device,
without a host sync, so the round stays as fast as plain FedAvg.
"""

from dataclasses import dataclass

from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.strategies import FedAvg


@dataclass(frozen=True)
class ClippedOptions:
    max_norm: float = option(1.0, "Largest L2 norm of the averaged update the server applies.", min=0.0, min_open=True)


@registry.strategy("fedavg_clipped", ClippedOptions)
class FedAvgClipped(FedAvg):
    """FedAvg with the averaged update scaled down to at most ``max_norm`` (L2) before the step."""

    name = "fedavg_clipped"

    def __init__(self, *, num_params, device, lr=1.0, options=ClippedOptions()):
        super().__init__(num_params=num_params, device=device, lr=lr)
        self.max_norm = options.max_norm

    def step(self, global_flat: Tensor, avg_update: Tensor) -> None:
        # scale = min(1, max_norm / ||Δ̄||): updates inside the ball pass unchanged.
        scale = (self.max_norm / avg_update.norm().clamp(min=1e-12)).clamp(max=1.0)
        global_flat.add_(avg_update * (scale * self.lr))
