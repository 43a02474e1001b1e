"""FedProx (Li et al., MLSys 2020) on the server.

FedProx changes the clients, not the server: the proximal term (μ/2)·‖w − w_global‖² is added to
each client's local loss, and stragglers may send partial work. Both live in client training and
in the runner's straggler policy; the server step is exactly FedAvg's.
"""

from __future__ import annotations

from fedweb_engine.components import registry
from fedweb_engine.strategies.fedavg import FedAvg


class FedProx(FedAvg):
    """FedAvg's server step under FedProx's name (μ is used by client training, not here)."""

    name = "fedprox"


@registry.strategy("fedprox")
def fedprox(*, num_params, device, lr: float, options) -> FedProx:
    """FedProx: FedAvg's server step; the proximal term μ is client training's."""
    return FedProx(num_params=num_params, device=device, lr=lr)
