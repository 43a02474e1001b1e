"""FedAdagrad (Reddi et al. 2021): like FedAdam, but v accumulates every Δ̄²: v ← v + Δ̄².

Same momentum m (β1), initial v = τ² and no bias correction as FedAdam; β2 is unused.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.strategies.fedadam import BETA1_HELP, TAU_HELP, FedAdam


class FedAdagrad(FedAdam):
    """Adaptive server optimizer whose step size only shrinks as Σ Δ̄² grows."""

    name = "fedadagrad"

    def _update_v(self, squared: Tensor) -> None:
        self.v.add_(squared)


@dataclass(frozen=True)
class AdagradOptions:
    beta1: float = option(0.9, BETA1_HELP, min=0, max=0.999)
    tau: float = option(1e-3, TAU_HELP, min=0, min_open=True, max=1)


@registry.strategy("fedadagrad", AdagradOptions, server_optimizer="adagrad", moments=1)
def fedadagrad(*, num_params, device, lr: float, options: AdagradOptions) -> FedAdagrad:
    """FedAdagrad: the server's step size shrinks as Σ Δ̄² grows."""
    return FedAdagrad(num_params=num_params, device=device, lr=lr, beta1=options.beta1, tau=options.tau)
