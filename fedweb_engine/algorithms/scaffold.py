"""SCAFFOLD (Karimireddy et al., ICML 2020), option II of its control-variate update.

Each local step uses ``g + c − c_i`` (``c`` the server's control variate, ``c_i`` the client's).
After K local steps from ``x`` to ``y_i``: ``c_i⁺ = c_i − c + (x − y_i)/(K·η_l)`` and the client
sends ``Δc_i = c_i⁺ − c_i`` beside its update; the server sets ``c ← c + (1/N)·ΣΔc_i`` over the
clients that reported (N: every client). The model step is the server strategy's (FedAvg's
``server_lr`` is the paper's η_g; FedAdam and the others compose the same way).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from fedweb_engine.algorithms.base import ClientAlgorithm, GroupContext
from fedweb_engine.components import registry


@registry.algorithm("scaffold")
class Scaffold(ClientAlgorithm):
    """Control variates correct each local step for the client's drift (SCAFFOLD, option II)."""

    corrects = corrects_weights = True
    returns = ("c_delta",)

    def client_state(self) -> dict[str, int]:
        return {"c_i": self.num_params}

    def server_state(self) -> dict[str, Tensor]:
        return {"c": torch.zeros(self.num_params, device=self.device)}

    def prepare(self, ctx: GroupContext) -> None:
        ctx.scratch["drift"] = ctx.server["c"] - ctx.state["c_i"]  # fixed through the local steps

    def correct(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        drift = ctx.scratch.get("drift")
        if drift is None:  # a caller that did not prepare the group
            g.add_(ctx.server["c"]).sub_(ctx.state["c_i"])
        else:
            g.add_(drift)  # g + c − c_i: one pass over [n, P] per step

    def correct_weights(self, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        drift = ctx.scratch.get("drift")
        if drift is None:
            w.sub_(ctx.server["c"], alpha=self.lr).add_(ctx.state["c_i"], alpha=self.lr)
        else:
            w.sub_(drift, alpha=self.lr)  # w − lr·(c − c_i)

    def finish(self, delta: Tensor, steps: Tensor, ctx: GroupContext) -> dict[str, Tensor]:
        c_i = ctx.state["c_i"]
        # (x − y_i)/(K·η_l) − c, where delta = y_i − x; padding slots (K = 0) are never kept.
        scale = -1.0 / (steps.clamp(min=1).to(delta.dtype) * self.lr)
        c_delta = delta * scale.unsqueeze(1) - ctx.server["c"]
        c_i.add_(c_delta)
        return {"c_delta": c_delta}

    def fold(self, server, avg_update, sums: Mapping[str, Tensor], reported, num_clients: int) -> None:
        server["c"].add_(sums["c_delta"], alpha=1.0 / num_clients)
