"""A compacted vectorised PyTorch loop for FedAvg, FedProx and SCAFFOLD: the ~130 lines a skilled user
writes with ``torch.func``.

Per round: stack the cohort's copies of the global weights (``[clients, ...]`` per tensor), draw
each client's shuffled mini-batches for every local epoch, then take the local steps with
``vmap(grad(loss))`` over **only the clients that still have a batch** at that step, then average
the clients' weights by sample counts. The client algorithm is the spec's ``algorithm.client``:

- ``fedprox``: each step adds ``μ·(w − w_global)`` to the gradient;
- ``scaffold`` (option II): each step adds ``c − c_i``, computed once per round for the cohort (it
  does not change during local training); after K steps ``Δc_i = (w_global − y_i)/(K·η) − c``,
  ``c_i += Δc_i`` and ``c += ΣΔc_i / N``. Every ``c_i`` lives in one ``[N, ...]`` tensor per weight.

Why this is the best simple baseline: a vectorised loop that pads every client to the round's
longest client spends most of its steps on masked rows (on the memory report's workload, cohorts
of 80-120 clients of very different sizes, most clients are idle in the later steps), and runs no
faster than the sequential loop. Sorting the cohort by step count (longest first) makes the active
clients a prefix of the stack at every step, so each step vmaps a slice ``[:active]`` with no
gather or scatter: the few lines that remove the padding cost, which anyone tuning such a loop
would add. A step's batch is gathered with ``index_select`` on the flattened row indices, which a
profile of the loop points to at once: ``x[rows]`` with a 2-D index runs a generic kernel about 20x
slower on a CPU, a fifth of the loop's time. Nothing per step is allocated beyond the autograd
temporaries. ``benchmarks.engine_overhead`` checks in every run that this loop is at least 1.8x the
sequential one (else it reports the baseline as invalid). It reads the same :class:`FederatedData`
and builds the same initial model as the engine.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from benchmarks.plain import ALGORITHMS, PlainRound, _sync
from fedweb_engine.data.base import FederatedData, as_input
from fedweb_engine.models import build_model
from fedweb_engine.spec.schema import Spec


class VmapFedAvg:
    """FedAvg (or FedProx, SCAFFOLD) with a round's clients trained together by ``vmap(grad(...))``,
    compacted per step."""

    def __init__(self, spec: Spec, data: FederatedData, device: torch.device):
        self.spec, self.device = spec, device
        self.algorithm, self.mu = spec.algorithm.client.name, spec.algorithm.mu
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm.client.name: the loop runs {', '.join(ALGORITHMS)}, not {self.algorithm}")
        self.data = data.to(device)
        self.offsets = data.offsets.tolist()
        generator = torch.Generator().manual_seed(spec.seed)
        self.model = build_model(spec.model, data.input_shape, data.num_classes, generator=generator).to(device)
        self.weights = {k: v.detach().clone() for k, v in self.model.named_parameters()}
        if self.algorithm == "scaffold":
            self.c = {k: torch.zeros_like(v) for k, v in self.weights.items()}
            self.c_i = {k: v.new_zeros(data.num_clients, *v.shape) for k, v in self.weights.items()}
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
        batches, active, ids, sizes, steps = self._batches(cohort)  # rows [steps, clients, B] (-1 = padding)
        stacked = {k: v.expand(len(cohort), *v.shape).clone() for k, v in self.weights.items()}
        if self.algorithm == "scaffold":  # c − c_i of each client, fixed through its local steps
            drift = {k: self.c[k] - self.c_i[k][ids] for k in stacked}
        lr, loss_sum = self.spec.local.lr, torch.zeros(len(cohort), device=self.device)
        x_train, y_train, B = self.data.x_train, self.data.y_train, self.spec.local.batch_size
        for rows, k in zip(batches, active, strict=True):
            rows = rows[:k]  # clients sorted longest first: the ones still training are a prefix
            mask = (rows >= 0).float()
            flat = rows.clamp(min=0).flatten()
            x = x_train.index_select(0, flat).view(k, B, *x_train.shape[1:])
            grads, losses = self.step({n: w[:k] for n, w in stacked.items()}, x,
                                      y_train.index_select(0, flat).view(k, B), mask)  # fmt: skip
            for n, g in grads.items():
                if self.algorithm == "fedprox":
                    g.add_(stacked[n][:k], alpha=self.mu).sub_(self.weights[n], alpha=self.mu)  # no temporary
                elif self.algorithm == "scaffold":
                    g.add_(drift[n][:k])
                stacked[n][:k].sub_(g, alpha=lr)
            loss_sum[:k] += losses
        n = torch.tensor(sizes, dtype=torch.float32, device=self.device)
        steps = torch.tensor(steps, dtype=torch.float32, device=self.device)
        share = n / n.sum()
        if self.algorithm == "scaffold":
            self._fold_control_variates(stacked, ids, steps)
        self.weights = {k: torch.einsum("c,c...->...", share, v) for k, v in stacked.items()}
        train_loss = float((loss_sum / steps.clamp(min=1) * share).sum())
        _sync(self.device)
        samples = int(sum(sizes)) * self.spec.local.epochs
        return PlainRound(len(cohort), samples, time.perf_counter() - t0, train_loss)

    def _fold_control_variates(self, stacked, ids: torch.Tensor, steps: torch.Tensor) -> None:
        """SCAFFOLD option II: Δc_i = (x − y_i)/(K·η) − c; c_i += Δc_i; c += ΣΔc_i / N."""
        scale = 1.0 / (steps.clamp(min=1) * self.spec.local.lr)
        for k, y in stacked.items():
            c_delta = (self.weights[k] - y) * scale.view(-1, *[1] * (y.dim() - 1)) - self.c[k]
            self.c_i[k][ids] += c_delta
            self.c[k] += c_delta.sum(0) / self.data.num_clients

    def _batches(self, cohort) -> tuple[torch.Tensor, list[int], torch.Tensor, list[int], list[int]]:
        """Row indices ``[steps, clients, B]`` (clients longest first), active clients per step, the
        clients' ids in that order, their sizes and step counts."""
        b, epochs = self.spec.local.batch_size, self.spec.local.epochs
        per_client = []
        for c in cohort:
            lo, hi = self.offsets[int(c)], self.offsets[int(c) + 1]
            epochs_rows = [lo + self.rng.permutation(hi - lo) for _ in range(epochs)]
            per_client.append(([e[i : i + b] for e in epochs_rows for i in range(0, hi - lo, b)], hi - lo, int(c)))
        per_client.sort(key=lambda p: -len(p[0]))
        sizes = [size for _, size, _ in per_client]
        steps = [len(p) for p, _, _ in per_client]
        ids = torch.tensor([c for _, _, c in per_client], dtype=torch.int64, device=self.device)
        rows = np.full((steps[0], len(cohort), b), -1, dtype=np.int64)
        for j, (batches, _, _) in enumerate(per_client):
            for s, batch in enumerate(batches):
                rows[s, j, : len(batch)] = batch
        active = [sum(1 for n in steps if n > s) for s in range(steps[0])]
        return torch.from_numpy(rows).to(self.device), active, ids, sizes, steps
