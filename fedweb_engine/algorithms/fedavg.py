"""FedAvg's client (McMahan et al., 2017): plain local SGD, no hook at all."""

from __future__ import annotations

from fedweb_engine.algorithms.base import ClientAlgorithm
from fedweb_engine.components import registry


@registry.algorithm("fedavg")
class FedAvgClient(ClientAlgorithm):
    """Plain local SGD: the update is all a client sends (no per-step work)."""
