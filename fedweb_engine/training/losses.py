"""The training loss of a batch: per-sample task losses, their weighted sum that a vectorised step
differentiates, and fp16's dynamic loss scaling (client.py's trainers and evaluation.py use them)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def task_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-sample loss: cross-entropy for classification, mean token cross-entropy for LMs."""
    if y.dim() == 1:
        return F.cross_entropy(logits.float(), y, reduction="none")
    per_token = F.cross_entropy(logits.flatten(0, -2).float(), y.flatten(), reduction="none")
    return per_token.view(y.shape).mean(dim=-1)


def weighted_task_loss(logits: torch.Tensor, y: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Σ weights · per-sample loss (``weights``: :func:`batch_weights`, so a mean over real samples).

    For classification, the log-softmax picked at the label: cross-entropy's value and gradient,
    in a third of the operations ``F.cross_entropy`` runs under vmap (its ignore_index handling
    is decomposed into wheres and a scatter at every step).
    """
    if y.dim() == 1:
        picked = logits.float().log_softmax(-1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
        return -(picked * weights).sum()
    return (task_loss(logits, y) * weights).sum()


def batch_weights(mask: torch.Tensor) -> torch.Tensor:
    """``mask`` [..., B] (1 for real samples) over each batch's real-sample count: per-sample weights
    whose weighted sum is the batch mean. Computed once per group, not at every step."""
    return mask / mask.sum(dim=-1, keepdim=True).clamp(min=1.0)


class LossScaler:
    """Dynamic loss scaling for fp16: halve on overflow, double after 200 clean steps.

    The scale and the clean-step count are device tensors updated with ``torch.where`` (as
    ``torch.amp.GradScaler`` does), so a step never waits for the device to say whether it
    overflowed: with ``cuda:all`` a host sync per step would serialise the GPUs.
    """

    GROWTH_INTERVAL = 200

    def __init__(self, enabled: bool, device: torch.device | str = "cpu", scale: float = 2.0**12):
        self.enabled = enabled
        self._scale = torch.tensor(scale if enabled else 1.0, device=device)
        self._clean = torch.zeros((), dtype=torch.int64, device=device)

    @property
    def scale(self) -> float:
        """The current scale as a number (one host sync: read per checkpoint, not per step)."""
        return float(self._scale)

    @scale.setter
    def scale(self, value: float) -> None:
        self._scale.fill_(value)

    @property
    def tensor(self) -> torch.Tensor:
        """The scale as a device tensor (1.0 when scaling is off), for steps that take it as an input."""
        return self._scale

    @property
    def factor(self) -> torch.Tensor | float:
        """What the loss is multiplied by: the device scale in fp16, a plain 1.0 otherwise."""
        return self._scale if self.enabled else 1.0

    def unscale_and_check(self, g: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        """Divide ``g`` [G, P] by the scale; return ``active`` with overflowing clients' step skipped."""
        if not self.enabled:
            return active
        g.div_(self._scale)
        finite = torch.isfinite(g).all(dim=1)
        g.nan_to_num_(0.0, 0.0, 0.0)
        clean = finite.all()
        count = torch.where(clean, self._clean + 1, 0)
        grow = count >= self.GROWTH_INTERVAL
        factor = torch.where(clean, torch.where(grow, 2.0, 1.0), 0.5)
        self._scale.mul_(factor)
        self._clean.copy_(torch.where(grow, 0, count))
        return active * finite
