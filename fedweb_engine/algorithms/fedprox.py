"""FedProx's client (Li et al., MLSys 2020): local SGD on f_k(w) + (μ/2)·‖w − w_global‖².

Its gradient adds μ·(w − w_global) at each step. Stragglers' partial work is the runner's
``heterogeneity.straggler_policy: partial``, not this hook.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from fedweb_engine.algorithms.base import ClientAlgorithm, GroupContext
from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@dataclass(frozen=True)
class FedProxOptions:
    mu: float = option(0.01, "Proximal term μ: pulls each client towards the model it received.", min=0, max=1000)


@registry.algorithm("fedprox", FedProxOptions)
class FedProxClient(ClientAlgorithm):
    """Local SGD with the proximal term μ/2·‖w − w_global‖² (FedProx)."""

    corrects = corrects_weights = True

    def correct(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        if self.options.mu:  # μ·(w − start) in place: a [n, P] temporary costs page faults at every step
            g.add_(w, alpha=self.options.mu).sub_(start, alpha=self.options.mu)

    def correct_weights(self, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        if self.options.mu:  # w − lr·μ·(w − start), one pass over [n, P]
            w.lerp_(start, self.lr * self.options.mu)
