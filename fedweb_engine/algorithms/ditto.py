"""Ditto (Li et al., ICML 2021): a personal model per client beside the global one.

The global model trains as FedAvg's. Each client also keeps a personal model ``v_k`` (its state,
with an "initialised" flag: a client's first personal model starts from the global one), trained
on the same batches with ``∇f_k(v) + λ·(v − w_global)`` before the global pass. Federated
evaluation (``evaluation.clients``) measures the personal models on each client's held-out data.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from fedweb_engine.algorithms.base import ClientAlgorithm, GroupContext
from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@dataclass(frozen=True)
class DittoOptions:
    lam: float = option(0.1, "λ: how strongly each personal model is pulled to the global model.", min=0, max=1000)


@registry.algorithm("ditto", DittoOptions)
class Ditto(ClientAlgorithm):
    """Personal models regularised towards the global one (Ditto, λ); the global model is FedAvg's."""

    personal = "personal"

    def client_state(self) -> dict[str, int]:
        return {"personal": self.num_params + 1}  # the weights, then 1.0 once initialised

    def correct_personal(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        if self.options.lam:
            g.add_(w - start, alpha=self.options.lam)
