"""FedDyn (Acar et al., ICLR 2021): a dynamic regulariser that aligns local and global optima.

Client k minimises ``L_k(θ) − ⟨∇L_k(θ_k^{t−1}), θ⟩ + (α/2)·‖θ − θ^{t−1}‖²``: each step adds
``−h_k + α·(θ − θ^{t−1})`` to the gradient, where ``h_k`` (the client's state) is
``∇L_k(θ_k^{t−1})``, updated after training to ``h_k − α·(θ_k^t − θ^{t−1})``. The server keeps
``h ← h − (α/N)·Σ_k (θ_k^t − θ^{t−1})`` (N: every client) and its model is the clients' mean
minus ``h/α``: here the averaged update loses ``h/α`` before the server strategy steps.
The mean is the engine's sample-weighted one (the paper's is unweighted: equal on equal clients).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from fedweb_engine.algorithms.base import ClientAlgorithm, GroupContext
from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@dataclass(frozen=True)
class FedDynOptions:
    alpha: float = option(0.01, "Regulariser weight α.", min=0, min_open=True, max=1000)


@registry.algorithm("feddyn", FedDynOptions)
class FedDyn(ClientAlgorithm):
    """A per-client linear term and a quadratic pull to the global model (FedDyn, α)."""

    corrects = corrects_weights = True
    returns = ("delta",)
    changes_update = True
    # Nothing travels beside the model: h stays on the server, and the returned delta is the update.
    broadcasts = uploads = ()

    def client_state(self) -> dict[str, int]:
        return {"h_i": self.num_params}

    def server_state(self) -> dict[str, Tensor]:
        return {"h": torch.zeros(self.num_params, device=self.device)}

    def correct(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        g.sub_(ctx.state["h_i"]).add_(w - start, alpha=self.options.alpha)

    def correct_weights(self, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        # w − lr·(−h_i + α·(w − start))
        w.lerp_(start, self.lr * self.options.alpha).add_(ctx.state["h_i"], alpha=self.lr)

    def finish(self, delta: Tensor, steps: Tensor, ctx: GroupContext) -> dict[str, Tensor]:
        ctx.state["h_i"].sub_(delta, alpha=self.options.alpha)
        return {"delta": delta}

    def fold(self, server, avg_update, sums: Mapping[str, Tensor], reported, num_clients: int) -> None:
        alpha = self.options.alpha
        server["h"].sub_(sums["delta"], alpha=alpha / num_clients)
        if avg_update is not None:
            avg_update.sub_(server["h"], alpha=1.0 / alpha)
