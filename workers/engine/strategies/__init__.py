"""Server strategies: pure aggregation functions plus one small class per algorithm.

Every strategy works on the model as one flat fp32 vector of P entries:
``strategy.step(global_flat, avg_update)`` updates ``global_flat`` in place from the cohort's
weighted-average update Δ̄ (or, for a strategy registered with ``needs_updates=True`` such as
those of :mod:`~workers.engine.strategies.robust`, from the round's ``[n, P]`` updates), and
``state_dict()``/``load_state_dict()`` carry every optimizer buffer through checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from workers.engine import registry
from workers.engine.spec import AlgorithmSpec
from workers.engine.strategies.aggregate import accumulate_, divide_by_total_, weighted_average

# In the order the form lists them (each module registers its strategy on import).
from workers.engine.strategies.fedavg import FedAvg  # isort: skip
from workers.engine.strategies.fedavgm import FedAvgM  # isort: skip
from workers.engine.strategies.fedadam import FedAdam  # isort: skip
from workers.engine.strategies.fedyogi import FedYogi  # isort: skip
from workers.engine.strategies.fedadagrad import FedAdagrad  # isort: skip
from workers.engine.validation import build

# Every strategy is a FedAvg: same step/state_dict/load_state_dict interface.
Strategy = FedAvg

__all__ = [
    "FedAdagrad",
    "FedAdam",
    "FedAvg",
    "FedAvgM",
    "FedYogi",
    "Strategy",
    "accumulate_",
    "build_strategy",
    "divide_by_total_",
    "needs_updates",
    "strategy_options",
    "weighted_average",
]


def build_strategy(spec: AlgorithmSpec, num_params: int, device: torch.device | str, options: Any = None) -> Strategy:
    """The registered server strategy ``spec.name``, built with the spec's options (or ``options``,
    a mapping or the options dataclass, when given: tests and benchmarks)."""
    component = registry.get("strategy", spec.name)
    chosen = spec.options if options is None else strategy_options(component, options)
    return component.factory(num_params=num_params, device=device, lr=spec.server_lr, options=chosen)


def strategy_options(component: registry.Component, value: Any) -> Any:
    """``value`` as ``component``'s options dataclass: None gives the defaults, a mapping is
    validated field by field (errors name ``algorithm.options.<field>``)."""
    if value is None:
        return component.default_options()
    if isinstance(value, component.options):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"{component.name} options must be a mapping or {component.options.__name__}")
    return build(component.options, dict(value), bounds=True, prefix="algorithm.options.")


def needs_updates(name: str) -> bool:
    """Whether strategy ``name`` steps on every client's update (its registry trait), so the
    round must keep them all instead of streaming their sum."""
    return bool(registry.get("strategy", name).traits["needs_updates"])
