"""FedAdagrad (Reddi et al. 2021): like FedAdam, but v accumulates every Δ̄²: v ← v + Δ̄².

Same momentum m (β1), initial v = τ² and no bias correction as FedAdam; β2 is unused.
"""

from __future__ import annotations

from torch import Tensor

from fedweb_engine.components.builtin_options import AdagradOptions
from fedweb_engine.strategies.fedadam import FedAdam


class FedAdagrad(FedAdam):
    """Adaptive server optimizer whose step size only shrinks as Σ Δ̄² grows."""

    name = "fedadagrad"

    def _update_v(self, squared: Tensor) -> None:
        self.v.add_(squared)


def fedadagrad(*, num_params, device, lr: float, options: AdagradOptions) -> FedAdagrad:
    """FedAdagrad: the server's step size shrinks as Σ Δ̄² grows."""
    return FedAdagrad(num_params=num_params, device=device, lr=lr, beta1=options.beta1, tau=options.tau)
