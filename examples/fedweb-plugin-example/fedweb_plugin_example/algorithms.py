"""A client algorithm: each client clips its gradient to an L2 norm at every local step.

Client-side clipping bounds how far one step can move a client, whatever its data, which tames
the exploding local updates of very non-IID clients. The hook runs on the engine's flat
tensors: ``g`` holds one row per client trained together (``[n, P]``), so the rule below is one
vectorised operation for the whole group, and the sequential trainer calls it with ``n = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from fedweb_engine.algorithms import ClientAlgorithm, GroupContext
from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@dataclass(frozen=True)
class ClippedStepsOptions:
    max_norm: float = option(
        1.0, "Largest L2 norm of a client's gradient at one local step.", min=0, min_open=True, max=1e6
    )


@registry.algorithm("clipped_steps", ClippedStepsOptions)
class ClippedSteps(ClientAlgorithm):
    """Local SGD whose gradient is clipped per client to ``max_norm`` at every step."""

    corrects = True  # ask the trainers to call correct() at each local step

    def correct(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        norms = g.norm(dim=1, keepdim=True)  # [n, 1]: one norm per client
        g.mul_((self.options.max_norm / norms.clamp(min=1e-12)).clamp(max=1.0))
