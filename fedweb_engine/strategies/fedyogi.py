"""FedYogi (Reddi et al. 2021): like FedAdam, but v moves additively towards Δ̄².

    v ← v − (1 − β2)·Δ̄²·sign(v − Δ̄²)

so v grows or shrinks by at most (1 − β2)·Δ̄² per round, which is less aggressive than Adam's
decay when updates become sparse. Same initial v = τ² and no bias correction as FedAdam.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.strategies.fedadam import AdamOptions, FedAdam


class FedYogi(FedAdam):
    """Adaptive server optimizer with Yogi's sign-controlled second moment."""

    name = "fedyogi"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._sign = torch.empty(self.num_params, dtype=torch.float32, device=self.device)

    def _update_v(self, squared: Tensor) -> None:
        sign = torch.sub(self.v, squared, out=self._sign).sign_()
        self.v.addcmul_(squared, sign, value=-(1 - self.beta2))


@registry.strategy("fedyogi", AdamOptions, server_optimizer="yogi", moments=2)
def fedyogi(*, num_params, device, lr: float, options: AdamOptions) -> FedYogi:
    """FedYogi: Yogi's additive second moment on the server."""
    return FedYogi(num_params=num_params, device=device, lr=lr, **dataclasses.asdict(options))
