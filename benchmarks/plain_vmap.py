"""A compacted vectorised PyTorch FedAvg loop: the ~100 lines a skilled user writes with ``torch.func``.

Per round: stack the cohort's copies of the global weights (``[clients, ...]`` per tensor), draw
each client's shuffled mini-batches for every local epoch, then take the local steps with
``vmap(grad(loss))`` over **only the clients that still have a batch** at that step, then average
the clients' weights by sample counts.

Why this is the best simple baseline: a vectorised loop that pads every client to the round's
longest client spends most of its steps on masked rows (on the memory report's workload, cohorts
of 80-120 clients of very different sizes, most clients are idle in the later steps), and runs no
faster than the sequential loop. Sorting the cohort by step count (longest first) makes the active
clients a prefix of the stack at every step, so each step vmaps a slice ``[:active]`` with no
gather or scatter: the few lines that remove the padding cost, which anyone tuning such a loop
would add. ``benchmarks.engine_overhead`` checks in every run that this loop is at least 1.8x the
sequential one (else it reports the baseline as invalid). It reads the same
:class:`FederatedData` and builds the same initial model as the engine.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from benchmarks.plain import PlainRound, _sync
from workers.engine.data.base import FederatedData, as_input
from workers.engine.models import build_model
from workers.engine.spec import Spec


class VmapFedAvg:
    """FedAvg with a round's clients trained together by ``vmap(grad(...))``, compacted per step."""

    def __init__(self, spec: Spec, data: FederatedData, device: torch.device):
        self.spec, self.device = spec, device
        self.data = data.to(device)
        self.offsets = data.offsets.tolist()
        generator = torch.Generator().manual_seed(spec.seed)
        self.model = build_model(spec.model, data.input_shape, data.num_classes, generator=generator).to(device)
        self.weights = {k: v.detach().clone() for k, v in self.model.named_parameters()}
        self.rng = np.random.default_rng([spec.seed, 7])
        self.round = 0
        self.step = vmap(grad(self._loss, has_aux=True), in_dims=(0, 0, 0, 0))

    def _loss(self, weights, x, y, mask):
        logits = functional_call(self.model, weights, (as_input(x),))
        per_row = F.cross_entropy(logits, y, reduction="none") * mask
        loss = per_row.sum() / mask.sum().clamp(min=1)
        return loss, loss.detach()

    def next_round(self) -> PlainRound:
        self.round += 1
        cohort = self.rng.choice(self.data.num_clients, size=self.spec.cohort_size(self.round), replace=False)
        _sync(self.device)
        t0 = time.perf_counter()
        batches, active, sizes, steps = self._batches(cohort)  # rows [steps, clients, B] (-1 = padding)
        stacked = {k: v.expand(len(cohort), *v.shape).clone() for k, v in self.weights.items()}
        lr, loss_sum = self.spec.local.lr, torch.zeros(len(cohort), device=self.device)
        for rows, k in zip(batches, active, strict=True):
            rows = rows[:k]  # clients sorted longest first: the ones still training are a prefix
            mask = (rows >= 0).float()
            idx = rows.clamp(min=0)
            grads, losses = self.step({n: w[:k] for n, w in stacked.items()}, self.data.x_train[idx],
                                      self.data.y_train[idx], mask)  # fmt: skip
            for n, g in grads.items():
                stacked[n][:k].sub_(g, alpha=lr)
            loss_sum[:k] += losses
        n = torch.tensor(sizes, dtype=torch.float32, device=self.device)
        steps = torch.tensor(steps, dtype=torch.float32, device=self.device)
        share = n / n.sum()
        self.weights = {k: torch.einsum("c,c...->...", share, v) for k, v in stacked.items()}
        train_loss = float((loss_sum / steps.clamp(min=1) * share).sum())
        _sync(self.device)
        samples = int(sum(sizes)) * self.spec.local.epochs
        return PlainRound(len(cohort), samples, time.perf_counter() - t0, train_loss)

    def _batches(self, cohort) -> tuple[torch.Tensor, list[int], list[int], list[int]]:
        """Row indices ``[steps, clients, B]`` (clients longest first), active clients per step, sizes, steps."""
        b, epochs = self.spec.local.batch_size, self.spec.local.epochs
        per_client = []
        for c in cohort:
            lo, hi = self.offsets[int(c)], self.offsets[int(c) + 1]
            epochs_rows = [lo + self.rng.permutation(hi - lo) for _ in range(epochs)]
            per_client.append(([e[i : i + b] for e in epochs_rows for i in range(0, hi - lo, b)], hi - lo))
        per_client.sort(key=lambda p: -len(p[0]))
        sizes = [size for _, size in per_client]
        steps = [len(p) for p, _ in per_client]
        rows = np.full((steps[0], len(cohort), b), -1, dtype=np.int64)
        for j, (batches, _) in enumerate(per_client):
            for s, batch in enumerate(batches):
                rows[s, j, : len(batch)] = batch
        active = [sum(1 for n in steps if n > s) for s in range(steps[0])]
        return torch.from_numpy(rows).to(self.device), active, sizes, steps
