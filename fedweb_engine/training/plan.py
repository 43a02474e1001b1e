"""Round planning: which clients take part, and which samples each uses at every local step.

Every random choice of a round is drawn here, on the host, from the simulation's one NumPy
generator and in a fixed order. Vectorised and sequential training consume the same plan, so
they see the same batches; a run resumed from a checkpoint (which stores the generator state)
draws exactly the plans an uninterrupted run would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Cohort:
    """The clients sampled for one round and what becomes of each."""

    clients: np.ndarray  # [c] client ids of the whole cohort
    trained: np.ndarray  # [k] ids that train and report, sorted by number of steps
    steps: np.ndarray  # [k] local steps of each trained client
    stragglers: int  # stragglers in the cohort (trained with fewer steps or dropped)
    dropped: int  # cohort members whose update is never aggregated


def sample_cohort(
    rng: np.random.Generator,
    sizes: np.ndarray,
    cohort_size: int,
    *,
    epochs: int,
    batch_size: int,
    straggler_fraction: float,
    straggler_policy: str,
    dropout: float,
) -> Cohort:
    """Draw the cohort, its dropouts and stragglers, and every trained client's step count."""
    num_clients = len(sizes)
    clients = np.sort(rng.choice(num_clients, size=cohort_size, replace=False))
    n_drop = int(round(dropout * cohort_size))
    n_strag = int(round(straggler_fraction * cohort_size))
    order = rng.permutation(cohort_size)
    dropout_pos = order[:n_drop]
    # Stragglers are drawn among the clients that do report.
    straggler_pos = order[n_drop : n_drop + n_strag]
    work = rng.random(len(straggler_pos))
    full_steps = epochs * np.ceil(sizes[clients] / batch_size).astype(np.int64)
    steps = full_steps.copy()
    keep = np.ones(cohort_size, dtype=bool)
    keep[dropout_pos] = False
    if straggler_policy == "drop":
        keep[straggler_pos] = False
    else:
        # A straggler manages only a random fraction of its E epochs (at least one step).
        steps[straggler_pos] = np.maximum(1, np.floor(work * full_steps[straggler_pos])).astype(np.int64)
    trained, steps = clients[keep], steps[keep]
    by_steps = np.argsort(steps, kind="stable")
    return Cohort(
        clients=clients,
        trained=trained[by_steps],
        steps=steps[by_steps],
        stragglers=len(straggler_pos),
        dropped=int(cohort_size - keep.sum()),
    )


@dataclass
class GroupPlan:
    """Batches for a group of clients trained together: ``idx[i, t]`` are the rows of step ``t``."""

    clients: torch.Tensor  # [g] client ids (padding slots repeat a real id, with weight 0)
    idx: torch.Tensor  # [g, T, B] int64 rows of the training tensors
    mask: torch.Tensor  # [g, T, B] float, 1 for real samples
    active: torch.Tensor  # [g, T] float, 1 while the client still has steps
    weights: torch.Tensor  # [g] float, client sample counts (0 for padding)
    real: int  # the first `real` slots are real clients


def plan_group(
    rng: np.random.Generator,
    clients: np.ndarray,
    steps: np.ndarray,
    offsets: np.ndarray,
    *,
    epochs: int,
    batch_size: int,
    slots: int,
) -> GroupPlan:
    """Shuffle each client's samples once per epoch and cut them into batches.

    ``slots`` (≥ len(clients)) is the padded group size: tensor shapes depend on it and on the
    longest client, never on the cohort size.
    """
    batches = draw_batches(rng, clients, steps, offsets, epochs=epochs, batch_size=batch_size)
    return assemble_group(clients, steps, batches, offsets, batch_size=batch_size, slots=slots)


def draw_batches(
    rng: np.random.Generator,
    clients: np.ndarray,
    steps: np.ndarray,
    offsets: np.ndarray,
    *,
    epochs: int,
    batch_size: int,
) -> list[np.ndarray]:
    """Each client's batches ([steps, B] sample positions, -1 for padding), drawn in client order.

    The draws depend only on the clients' order, not on how they are grouped: sharded and
    unsharded rounds drawing in the same order see the same batches.
    """
    out = []
    B = batch_size
    for c, s in zip(clients, steps, strict=True):
        n = int(offsets[c + 1] - offsets[c])
        per_epoch = math.ceil(n / B)
        rows = []
        for _ in range(epochs):
            perm = rng.permutation(n)
            padded = np.full(per_epoch * B, -1, dtype=np.int64)
            padded[:n] = perm
            rows.append(padded.reshape(per_epoch, B))
        out.append(np.concatenate(rows)[:s])
    return out


def assemble_group(
    clients: np.ndarray,
    steps: np.ndarray,
    batches: list[np.ndarray],
    offsets: np.ndarray,
    *,
    batch_size: int,
    slots: int,
) -> GroupPlan:
    """The padded tensors of one group from its clients' drawn ``batches``."""
    g = len(clients)
    T = int(steps.max()) if g else 1
    idx = np.zeros((slots, T, batch_size), dtype=np.int64)
    mask = np.zeros((slots, T, batch_size), dtype=np.float32)
    for i, (c, s, rows) in enumerate(zip(clients, steps, batches, strict=True)):
        start = int(offsets[c])
        real = rows >= 0
        idx[i, :s] = np.where(real, rows + start, start)
        mask[i, :s] = real
    if g:
        idx[g:] = idx[0]  # padding slots read valid rows; their mask stays 0
    padded_clients = np.concatenate([clients, np.full(slots - g, clients[0] if g else 0)])
    weights = np.zeros(slots, dtype=np.float32)
    weights[:g] = offsets[clients + 1] - offsets[clients]
    active = (mask.sum(axis=2) > 0).astype(np.float32)
    return GroupPlan(
        clients=torch.from_numpy(padded_clients.astype(np.int64)),
        idx=torch.from_numpy(idx),
        mask=torch.from_numpy(mask),
        active=torch.from_numpy(active),
        weights=torch.from_numpy(weights),
        real=g,
    )


def plan_groups(
    rng: np.random.Generator, cohort: Cohort, offsets: np.ndarray, *, group_size: int, epochs: int, batch_size: int
) -> list[GroupPlan]:
    """Cut the cohort's trained clients into groups of at most ``group_size`` and plan each one."""
    plans = []
    for first in range(0, len(cohort.trained), group_size):
        ids, steps = cohort.trained[first : first + group_size], cohort.steps[first : first + group_size]
        slots = bucket(len(ids), group_size)
        plans.append(plan_group(rng, ids, steps, offsets, epochs=epochs, batch_size=batch_size, slots=slots))
    return plans


def bucket(n: int, group_size: int) -> int:
    """Padded slot count for a group of ``n`` clients: the next power of two, capped at the group size.

    Shapes then come from a set of at most log2(group_size) + 1 sizes whatever the cohort sizes
    are, so the CUDA caching allocator, oneDNN's primitive cache and compiled graphs see no new
    shapes as cohorts vary. (Set ``client_group_size`` to the cohort size to avoid padding.)
    """
    if n >= group_size:
        return group_size
    return min(group_size, 1 << max(0, n - 1).bit_length())


def max_slots(spec) -> int:
    """The most client slots any round of ``spec`` (a :class:`~fedweb_engine.spec.schema.Spec`) can
    need: trainers size their buffers once, to this."""
    G = spec.compute.client_group_size
    largest = max(spec.participation.schedule or [spec.participation.clients_per_round])
    return bucket(min(largest, G), G)
