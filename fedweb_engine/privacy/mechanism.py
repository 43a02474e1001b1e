"""DP-FedAvg's mechanism (McMahan et al. 2018, central DP): clip, sum, add Gaussian noise, divide.

The engine only *applies* the mechanism; the privacy cost (ε at δ) is accounted outside it, by a
maintained accountant library, when the round is recorded (``workers/privacy.py``).

Each client's decoded update is scaled to norm at most C and counts with weight 1 (not its sample
count: with sample weights one client's influence would depend on its data size, which the
sensitivity bound cannot allow). The server adds N(0, (z·C)²) to the sum and divides by the
number of *sampled* clients, a denominator that does not depend on who reported, so one client
moves the model by at most C / cohort (plus the noise).

With adaptive clipping (Andrew et al. 2021, "Differentially Private Learning with Adaptive
Clipping") each client also reports whether its update was unclipped; the server learns the noisy
share b̄ and updates C ← C · exp(−η (b̄ − γ)). The count's noise σ_b takes a share of the privacy
budget, so the update's noise multiplier becomes z_Δ = (z⁻² − (2σ_b)⁻²)^(−1/2).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from fedweb_engine.spec.schema import PrivacySpec


def clip_rows_(updates: torch.Tensor, clip_norm: float) -> torch.Tensor:
    """Scale each row of ``updates`` ``[G, P]`` in place to L2 norm at most ``clip_norm``.

    Returns the rows' norms before clipping (``[G]``, on the device: no host sync).
    """
    norms = torch.linalg.vector_norm(updates, dim=1)
    factor = (clip_norm / norms.clamp(min=1e-12)).clamp(max=1.0)
    updates.mul_(factor.unsqueeze(1))
    return norms


class GaussianMechanism:
    """The server side of DP-FedAvg for one run: the clip norm (fixed or adaptive) and the noise."""

    def __init__(self, spec: PrivacySpec, num_params: int, device: torch.device):
        self.spec = spec
        self.clip_norm = spec.clip_norm
        self.noise = torch.empty(num_params, device=device)  # allocated once: memory stays flat
        self.generator = torch.Generator(device=device)

    def count_noise(self, cohort: int) -> float:
        """σ_b, the std of the noise on the count of unclipped updates (0 without adaptive clipping)."""
        if not self.spec.adaptive_clip:
            return 0.0
        return self.spec.count_noise or cohort / 20

    def update_noise_multiplier(self, cohort: int) -> float:
        """z_Δ: the update's share of the noise multiplier z (all of it without adaptive clipping)."""
        z = self.spec.noise_multiplier
        sigma_b = self.count_noise(cohort)
        if z == 0 or sigma_b == 0:
            return z
        return (z**-2 - (2 * sigma_b) ** -2) ** -0.5

    def privatise_(self, update_sum: torch.Tensor, cohort: int, rng: np.random.Generator) -> torch.Tensor:
        """Noise the sum of clipped updates and turn it into the average over the ``cohort`` sampled.

        The noise is drawn from a torch generator seeded from the run's NumPy generator, so a run
        (and a run resumed from a checkpoint, which restores that generator) is reproducible.
        """
        std = self.update_noise_multiplier(cohort) * self.clip_norm
        if std > 0:
            self.generator.manual_seed(int(rng.integers(2**62)))
            torch.randn(self.noise.shape, generator=self.generator, device=self.noise.device, out=self.noise)
            update_sum.add_(self.noise, alpha=std)
        return update_sum.div_(max(cohort, 1))

    def round_fields(
        self, stats: dict, clip_norm: float | None, cohort: int, reported: float, rng: np.random.Generator
    ) -> dict:
        """The clip norm used this round and the share it clipped; then C adapts for the next round."""
        unclipped = float(stats["unclipped"])
        self.adapt(unclipped, int(reported), cohort, rng)
        clipped = 1 - unclipped / reported if reported > 0 else None
        return {"dp_clip_norm": clip_norm, "dp_clipped_fraction": clipped}

    def adapt(self, unclipped: int, reported: int, cohort: int, rng: np.random.Generator) -> None:
        """Andrew et al.'s geometric update of C from the noisy share of unclipped updates."""
        if not self.spec.adaptive_clip or reported == 0:
            return
        sigma_b = self.count_noise(cohort)
        noisy = unclipped + (float(rng.normal(0.0, sigma_b)) if sigma_b > 0 else 0.0)
        share = noisy / cohort
        self.clip_norm *= math.exp(-self.spec.clip_lr * (share - self.spec.target_quantile))
