"""A plain sequential PyTorch FedAvg loop: what a user writes by hand, the baseline the engine must beat.

For each sampled client: load the global ``state_dict`` into one model, make a fresh
``torch.optim.SGD``, loop over shuffled mini-batches of the client's tensors; then average the
clients' ``state_dict``s weighted by their sample counts. It reads the same :class:`FederatedData`
and builds the same initial model as the engine, so both train the same workload.

The spec's client algorithm changes each step's gradients before ``opt.step()``, as its paper
writes it: FedProx adds ``μ·(w − w_global)``; SCAFFOLD (option II) adds ``c − c_i`` and, after the
client's K steps, sets ``Δc_i = (w_global − y_i)/(K·η) − c``, ``c_i += Δc_i``, ``c += ΣΔc_i / N``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedweb_engine.data.base import FederatedData, as_input
from fedweb_engine.models import build_model
from fedweb_engine.spec.schema import Spec

ALGORITHMS = ("fedavg", "fedprox", "scaffold")  # the client algorithms the hand-written loops implement


@dataclass(frozen=True)
class PlainRound:
    """What one round of the plain loop did; seconds cover training and averaging."""

    clients: int
    samples: int
    seconds: float
    train_loss: float


class PlainFedAvg:
    """FedAvg written the obvious way: one model, one client at a time, ``state_dict`` averaging."""

    def __init__(self, spec: Spec, data: FederatedData, device: torch.device):
        self.spec = spec
        self.device = device
        self.algorithm, self.mu = spec.algorithm.client.name, spec.algorithm.mu
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm.client.name: the loop runs {', '.join(ALGORITHMS)}, not {self.algorithm}")
        self.data = data.to(device)  # client tensors on the device, as a careful user would do
        self.offsets = data.offsets.tolist()
        generator = torch.Generator().manual_seed(spec.seed)  # the engine's initial weights
        self.model = build_model(spec.model, data.input_shape, data.num_classes, generator=generator).to(device)
        self.global_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        if self.algorithm == "scaffold":  # control variates: the server's c, and every client's c_i
            self.c = {k: torch.zeros_like(p) for k, p in self.model.named_parameters()}
            self.c_i = {k: p.new_zeros(data.num_clients, *p.shape) for k, p in self.model.named_parameters()}
        # Its own stream: the plain loop draws cohorts of the same size from the same distribution.
        self.rng = np.random.default_rng([spec.seed, 7])
        self.torch_gen = torch.Generator().manual_seed(spec.seed)
        self.round = 0

    def next_round(self) -> PlainRound:
        """Sample a cohort, train each client in turn, average; time it all (synchronised on CUDA)."""
        self.round += 1
        cohort = self.rng.choice(self.data.num_clients, size=self.spec.cohort_size(self.round), replace=False)
        _sync(self.device)
        t0 = time.perf_counter()
        total = {k: torch.zeros_like(v) for k, v in self.global_state.items()}
        weight = samples = 0
        loss_sum = torch.zeros((), device=self.device)
        c_sum = {k: torch.zeros_like(v) for k, v in self.c.items()} if self.algorithm == "scaffold" else {}
        for c in cohort:
            state, n, seen, loss = self._train_client(int(c), c_sum)
            for k, v in state.items():
                total[k].add_(v, alpha=n)
            weight += n
            samples += seen
            loss_sum += loss * n
        self.global_state = {k: v / weight for k, v in total.items()}
        for k, s in c_sum.items():
            self.c[k] += s / self.data.num_clients
        train_loss = float(loss_sum) / weight  # the one host sync of the round
        _sync(self.device)
        return PlainRound(len(cohort), samples, time.perf_counter() - t0, train_loss)

    def _train_client(
        self, c: int, c_sum: dict[str, torch.Tensor]
    ) -> tuple[dict[str, torch.Tensor], int, int, torch.Tensor]:
        local = self.spec.local
        lo, hi = self.offsets[c], self.offsets[c + 1]
        x, y = self.data.x_train[lo:hi], self.data.y_train[lo:hi]
        n = hi - lo
        self.model.load_state_dict(self.global_state)
        self.model.train()
        opt = torch.optim.SGD(
            self.model.parameters(), lr=local.lr, momentum=local.momentum, weight_decay=local.weight_decay
        )
        loss_sum = torch.zeros((), device=self.device)
        steps = seen = 0
        params = dict(self.model.named_parameters())
        if self.algorithm == "scaffold":
            drift = {k: self.c[k] - self.c_i[k][c] for k in params}  # c − c_i, fixed through the local steps
        for _ in range(local.epochs):
            perm = torch.randperm(n, generator=self.torch_gen).to(self.device)
            for i in range(0, n, local.batch_size):
                rows = perm[i : i + local.batch_size]
                loss = F.cross_entropy(self.model(as_input(x[rows])), y[rows])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if self.algorithm == "fedprox":
                    for k, p in params.items():
                        p.grad.add_(p.detach() - self.global_state[k], alpha=self.mu)
                elif self.algorithm == "scaffold":
                    for k, p in params.items():
                        p.grad.add_(drift[k])
                opt.step()
                loss_sum += loss.detach()
                steps += 1
                seen += len(rows)
        state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        if self.algorithm == "scaffold":
            for k, p in params.items():
                c_delta = (self.global_state[k] - p.detach()) / (max(steps, 1) * local.lr) - self.c[k]
                self.c_i[k][c] += c_delta
                c_sum[k] += c_delta
        return state, n, seen, loss_sum / max(steps, 1)

    @torch.no_grad()
    def evaluate(self) -> float:
        """Test accuracy of the global model (a sanity check that the loop really learns)."""
        self.model.load_state_dict(self.global_state)
        self.model.eval()
        x, y = self.data.x_test, self.data.y_test
        correct = 0
        for i in range(0, len(y), 1024):
            correct += int((self.model(as_input(x[i : i + 1024])).argmax(-1) == y[i : i + 1024]).sum())
        return correct / max(len(y), 1)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
