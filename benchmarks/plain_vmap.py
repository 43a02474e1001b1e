"""A plain vectorised PyTorch FedAvg loop: the ~100 lines a skilled user writes with ``torch.func``.

Per round: stack the cohort's copies of the global weights (``[clients, ...]`` per tensor), draw
each client's shuffled mini-batches for every local epoch, pad clients with fewer batches with
masked (zero-weight) rows, take every step for all clients at once with
``vmap(grad(loss))``, then average the clients' weights by sample counts. It reads the same
:class:`FederatedData` and builds the same initial model as the engine (issue 10's baseline for
the engine's own overhead on the memory report's workload).
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
    """FedAvg with all of a round's clients trained together by ``vmap(grad(...))``."""

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
        batches, sizes = self._batches(cohort)  # rows [steps, clients, B] (-1 = padding)
        stacked = {k: v.expand(len(cohort), *v.shape).clone() for k, v in self.weights.items()}
        lr, loss_sum, steps_done = self.spec.local.lr, torch.zeros(len(cohort)), torch.zeros(len(cohort))
        for rows in batches:
            mask = (rows >= 0).float()
            idx = rows.clamp(min=0)
            grads, losses = self.step(stacked, self.data.x_train[idx], self.data.y_train[idx], mask)
            active = mask.amax(dim=1)  # clients with no batch left this step take no step
            for k, g in grads.items():
                stacked[k].sub_(g * (lr * active).view(-1, *[1] * (g.dim() - 1)))
            loss_sum += losses.cpu() * active.cpu()
            steps_done += active.cpu()
        n = torch.tensor(sizes, dtype=torch.float32, device=self.device)
        share = n / n.sum()
        self.weights = {k: torch.einsum("c,c...->...", share, v) for k, v in stacked.items()}
        train_loss = float((loss_sum / steps_done.clamp(min=1) * n.cpu()).sum() / n.sum().cpu())
        _sync(self.device)
        samples = int(sum(sizes)) * self.spec.local.epochs
        return PlainRound(len(cohort), samples, time.perf_counter() - t0, train_loss)

    def _batches(self, cohort) -> tuple[torch.Tensor, list[int]]:
        """Every step's row indices for every client, ``-1`` where a client has no row left."""
        b, epochs = self.spec.local.batch_size, self.spec.local.epochs
        per_client, sizes = [], []
        for c in cohort:
            lo, hi = self.offsets[int(c)], self.offsets[int(c) + 1]
            sizes.append(hi - lo)
            epochs_rows = [lo + self.rng.permutation(hi - lo) for _ in range(epochs)]
            per_client.append([e[i : i + b] for e in epochs_rows for i in range(0, hi - lo, b)])
        steps = max(len(p) for p in per_client)
        rows = np.full((steps, len(cohort), b), -1, dtype=np.int64)
        for j, batches in enumerate(per_client):
            for s, batch in enumerate(batches):
                rows[s, j, : len(batch)] = batch
        return torch.from_numpy(rows).to(self.device), sizes
