"""Byzantine-robust server strategies: coordinate-wise median, trimmed mean and (Multi-)Krum.

A weighted average follows any single client that sends a large enough update; these rules
bound what a minority of bad clients can do, at the cost of needing every client's update at
once (``needs_updates=True``: the engine hands ``step`` the round's ``[n, P]`` decoded updates
instead of their streamed average). They are registered exactly as a plugin would register them.

All three ignore the clients' sample counts. Those counts are reported by the clients, so a
Byzantine client could claim a huge one and win any weighted vote; the rules are defined (and
their guarantees proved) unweighted in the papers cited below.

The pure functions work in fp32 on the updates' device and sort or compare column blocks of at
most :data:`BLOCK_ELEMENTS` entries at a time, so their scratch memory stays bounded whatever P is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.spec.validation import SpecError
from fedweb_engine.strategies.fedavg import FedAvg

# Scratch per column block: a sorted copy (fp32) and its indices (int64) of n × (BLOCK / n) entries.
BLOCK_ELEMENTS = 1 << 22
BLOCK_SCRATCH_BYTES = BLOCK_ELEMENTS * 12


# -- pure aggregation functions ----------------------------------------------------------------


def coordinate_median(updates: Tensor) -> Tensor:
    """The coordinate-wise median of ``updates`` ``[n, P]`` (Yin et al. 2018): ``[P]``.

    With an even ``n`` it is the mean of the two middle values (``torch.median`` would return
    the lower one, which biases every coordinate towards −∞ by half a gap).
    """
    n = _check_rows(updates)
    return _by_column_blocks(updates, lambda s: (s[(n - 1) // 2] + s[n // 2]) / 2)


def trimmed_count(n: int, beta: float) -> int:
    """Rows dropped from each end per coordinate: ⌊β·n⌋, the floor taken after rounding β·n to
    9 decimals so that e.g. 0.29·100 (28.999999999999996 in binary) trims 29, not 28."""
    return math.floor(round(beta * n, 9))


def trimmed_mean(updates: Tensor, beta: float) -> Tensor:
    """The coordinate-wise β-trimmed mean of ``updates`` ``[n, P]`` (Yin et al. 2018): ``[P]``.

    Per coordinate, the ⌊β·n⌋ largest and ⌊β·n⌋ smallest values are dropped and the rest
    averaged; 0 ≤ β < 0.5 leaves at least one value. β = 0 is the plain mean.
    """
    if not 0 <= beta < 0.5:
        raise ValueError(f"beta must be in [0, 0.5), not {beta}")
    n = _check_rows(updates)
    k = trimmed_count(n, beta)
    return _by_column_blocks(updates, lambda s: s[k : n - k].mean(dim=0))


def krum(updates: Tensor, f: int, m: int = 1) -> Tensor:
    """Multi-Krum (Blanchard et al. 2017; El Mhamdi et al. 2018) of ``updates`` ``[n, P]``: ``[P]``.

    Each update's score is the sum of its squared distances to its n − f − 2 nearest other
    updates; the ``m`` lowest-scoring updates are averaged (``m = 1`` is Krum: that update
    itself). ``m`` is capped at n − f, the updates Krum can vouch for. Ties go to the earlier row.

    When n ≤ f + 2 a score has no neighbour to sum, so Krum is undefined (the paper needs
    n > 2f + 2): the result is then the coordinate-wise median of all n updates, which needs no f
    and is still robust to a minority. A row with NaN or ∞ entries scores +∞ and is never chosen
    while finite rows remain.
    """
    n = _check_rows(updates)
    if f < 0 or m < 1:
        raise ValueError(f"krum needs f >= 0 and m >= 1, not f={f}, m={m}")
    if n <= f + 2:
        return coordinate_median(updates)
    distances = torch.cdist(updates, updates).square_()
    distances.fill_diagonal_(math.inf)  # an update is not its own neighbour
    nearest = torch.topk(distances, n - f - 2, dim=1, largest=False).values
    scores = nearest.sum(dim=1).nan_to_num_(nan=math.inf)
    chosen = torch.sort(scores, stable=True).indices[: min(m, n - f)]
    return updates.index_select(0, chosen).mean(dim=0)


def _check_rows(updates: Tensor) -> int:
    if updates.dim() != 2 or updates.shape[0] < 1:
        raise ValueError(f"updates must be [n >= 1, P], not {list(updates.shape)}")
    return updates.shape[0]


def _by_column_blocks(updates: Tensor, reduce: Callable[[Tensor], Tensor]) -> Tensor:
    """``reduce`` applied to each block of columns sorted along the clients; one ``[P]`` result."""
    n, p = updates.shape
    out = torch.empty(p, dtype=torch.float32, device=updates.device)
    width = max(1, BLOCK_ELEMENTS // n)
    for first in range(0, p, width):
        block = updates[:, first : first + width].float()
        out[first : first + width] = reduce(torch.sort(block, dim=0).values)
    return out


# -- the strategies ------------------------------------------------------------------------------


class RobustStrategy(FedAvg):
    """Base of the strategies that aggregate every update themselves: w ← w + η_s · agg(updates).

    Subclassing FedAvg gives the checkpoint round trip (these keep no state between rounds).
    """

    needs_updates = True
    Options: type = registry.NoOptions

    def __init__(self, *, num_params: int, device: torch.device | str, lr: float = 1.0, options=None):
        super().__init__(num_params=num_params, device=device, lr=lr)
        self.options = self.Options() if options is None else options

    def step(self, global_flat: Tensor, updates: Tensor, weights: Tensor) -> None:  # type: ignore[override]
        """``updates`` ``[n, P]``: the decoded update of each aggregated client; ``weights`` (their
        sample counts) are ignored on purpose (module docstring)."""
        global_flat.add_(self.aggregate(updates).to(global_flat.device), alpha=self.lr)

    def aggregate(self, updates: Tensor) -> Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_params={self.num_params}, lr={self.lr}, options={self.options})"


@registry.strategy("median", None, needs_updates=True)
class Median(RobustStrategy):
    """Coordinate-wise median of the clients' updates (Yin et al. 2018); robust while fewer than half are bad."""

    name = "median"

    def aggregate(self, updates: Tensor) -> Tensor:
        return coordinate_median(updates)


@dataclass(frozen=True)
class TrimmedMeanOptions:
    beta: float = option(
        0.1, "Share of the updates dropped from each end, per coordinate (⌊β·n⌋ each side).", min=0, max=0.5
    )

    def __post_init__(self):
        if not self.beta < 0.5:  # the field metadata has no open upper bound
            raise SpecError("algorithm.options.beta", "must be < 0.5 (trimming half from each end leaves nothing)")


@registry.strategy("trimmed_mean", TrimmedMeanOptions, needs_updates=True)
class TrimmedMean(RobustStrategy):
    """Coordinate-wise trimmed mean of the clients' updates (Yin et al. 2018); tolerates a β share of bad clients."""

    name = "trimmed_mean"
    Options = TrimmedMeanOptions

    def aggregate(self, updates: Tensor) -> Tensor:
        return trimmed_mean(updates, self.options.beta)


@dataclass(frozen=True)
class KrumOptions:
    byzantine: int = option(1, "f: how many bad clients a round may hold.", min=0, max=10_000)
    multi: int = option(1, "m: updates averaged (1 = Krum, more = Multi-Krum).", min=1, max=10_000)


@registry.strategy("krum", KrumOptions, needs_updates=True)
class Krum(RobustStrategy):
    """(Multi-)Krum (Blanchard et al. 2017): the update(s) closest to their n − f − 2 nearest others."""

    name = "krum"
    Options = KrumOptions

    def aggregate(self, updates: Tensor) -> Tensor:
        return krum(updates, self.options.byzantine, self.options.multi)
