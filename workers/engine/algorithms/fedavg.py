"""FedAvg's client (McMahan et al., 2017): plain local SGD, no hook at all."""

from __future__ import annotations

from workers.engine import registry
from workers.engine.algorithms.base import ClientAlgorithm


@registry.algorithm("fedavg")
class FedAvgClient(ClientAlgorithm):
    """Plain local SGD: the update is all a client sends (no per-step work)."""
