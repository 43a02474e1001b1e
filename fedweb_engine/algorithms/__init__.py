"""Client algorithms (``algorithm.client``): the extension point and the built-ins.

The built-ins register exactly as a plugin does, with ``@registry.algorithm``; the base class and
the hook contract are in :mod:`fedweb_engine.algorithms.base`.
"""

from __future__ import annotations

from typing import Any

import torch

import fedweb_engine.components.registry as registry
from fedweb_engine.algorithms.base import ClientAlgorithm, ClientRound, GroupContext, StateStore

__all__ = ["ClientAlgorithm", "ClientRound", "GroupContext", "StateStore", "build_algorithm"]


def build_algorithm(
    name: str, options: Any, *, num_params: int, device: torch.device | str, lr: float
) -> ClientAlgorithm:
    """The registered client algorithm ``name`` with ``options`` (its options dataclass)."""
    component = registry.get("algorithm", name)
    algorithm = component.factory(num_params=num_params, device=device, lr=lr, options=options)
    if not isinstance(algorithm, ClientAlgorithm):
        raise TypeError(f"client algorithm {name!r} must build a ClientAlgorithm, not {type(algorithm).__name__}")
    return algorithm
