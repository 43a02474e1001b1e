"""A deliberately leaky "user model": load with ``FEDWEB_PLUGINS=benchmarks.leaky_plugin``.

Wraps both client trainers' ``train`` so that every call keeps 50 MB of live tensors in a
module-level list, as user code with a forgotten cache would. Without process isolation the
process that trains grows by ~50 MB per call (one call per client group: one per round when the
round's clients fit in one group); with ``compute.isolation = "process"`` the leak dies with the
child at the end of each round. Used by ``benchmarks/isolation_leak.py`` and the worker tests.
"""

from __future__ import annotations

import functools

import torch

from fedweb_engine.training.client import SequentialTrainer, VectorTrainer

LEAK_MB = 50
kept: list[torch.Tensor] = []


def _leaking(train):
    @functools.wraps(train)
    def wrapper(*args, **kwargs):
        # torch.full writes every page, so the memory is resident (torch.empty would not be).
        kept.append(torch.full((LEAK_MB * 1024 * 1024 // 4,), 1.0))
        return train(*args, **kwargs)

    wrapper.leaks = True
    return wrapper


for _trainer in (VectorTrainer, SequentialTrainer):
    if not getattr(_trainer.train, "leaks", False):  # importing twice must not leak twice
        _trainer.train = _leaking(_trainer.train)
