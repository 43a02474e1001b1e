"""FedAdam (Reddi et al., ICLR 2021, "Adaptive Federated Optimization", Algorithm 2).

    m ← β1·m + (1 − β1)·Δ̄
    v ← β2·v + (1 − β2)·Δ̄²
    w ← w + η_s · m / (√v + τ)

Choices, as in the paper (and unlike torch.optim.Adam): no bias correction, and v starts at τ²
(the paper requires v₋₁ ≥ τ²; its code uses τ²), so the first steps are not huge when Δ̄ is
small. m starts at 0. FedYogi and FedAdagrad differ only in how v is updated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.strategies.fedavg import FedAvg


class FedAdam(FedAvg):
    """Adaptive server optimizer; subclasses override :meth:`_update_v`."""

    name = "fedadam"

    def __init__(
        self,
        *,
        num_params: int,
        device: torch.device | str,
        lr: float = 1.0,
        beta1: float = 0.9,
        beta2: float = 0.99,
        tau: float = 1e-3,
    ):
        super().__init__(num_params=num_params, device=device, lr=lr)
        self.beta1, self.beta2, self.tau = beta1, beta2, tau
        self.m = self._buffer("m")
        self.v = self._buffer("v", fill=tau * tau)
        # Scratch for Δ̄² and the denominator: preallocated so a step allocates nothing.
        self._scratch = torch.empty(num_params, dtype=torch.float32, device=self.device)

    def step(self, global_flat: Tensor, avg_update: Tensor) -> None:
        self.m.mul_(self.beta1).add_(avg_update, alpha=1 - self.beta1)
        squared = torch.mul(avg_update, avg_update, out=self._scratch)
        self._update_v(squared)
        denominator = torch.sqrt(self.v, out=self._scratch).add_(self.tau)
        global_flat.addcdiv_(self.m, denominator, value=self.lr)

    def _update_v(self, squared: Tensor) -> None:
        """Second moment update from Δ̄² (``squared`` may be overwritten)."""
        self.v.mul_(self.beta2).add_(squared, alpha=1 - self.beta2)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_params={self.num_params}, lr={self.lr}, beta1={self.beta1}, beta2={self.beta2}, tau={self.tau})"


BETA1_HELP = "First-moment decay of FedAdam/FedYogi/FedAdagrad."
TAU_HELP = "Adaptivity ε of FedAdam/FedYogi/FedAdagrad."


@dataclass(frozen=True)
class AdamOptions:
    beta1: float = option(0.9, BETA1_HELP, min=0, max=0.999)
    beta2: float = option(0.99, "Second-moment decay of FedAdam/FedYogi.", min=0, max=0.9999)
    tau: float = option(1e-3, TAU_HELP, min=0, min_open=True, max=1)


@registry.strategy("fedadam", AdamOptions, server_optimizer="adam", moments=2)
def fedadam(*, num_params, device, lr: float, options: AdamOptions) -> FedAdam:
    """FedAdam: Adam on the server (no bias correction, v starts at τ²)."""
    return FedAdam(num_params=num_params, device=device, lr=lr, **dataclasses.asdict(options))
