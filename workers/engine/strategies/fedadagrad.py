"""FedAdagrad (Reddi et al. 2021): like FedAdam, but v accumulates every Δ̄²: v ← v + Δ̄².

Same momentum m (β1), initial v = τ² and no bias correction as FedAdam; β2 is unused.
"""

from __future__ import annotations

from torch import Tensor

from workers.engine.strategies.fedadam import FedAdam


class FedAdagrad(FedAdam):
    """Adaptive server optimizer whose step size only shrinks as Σ Δ̄² grows."""

    name = "fedadagrad"

    def _update_v(self, squared: Tensor) -> None:
        self.v.add_(squared)
