"""Server strategies: pure aggregation functions plus one small class per algorithm.

Every strategy works on the model as one flat fp32 vector of P entries, and is one of two
protocols (:mod:`fedweb_engine.components.contracts`, checked when it registers): a
``StreamingStrategy``'s ``step(global_flat, avg_update)`` updates ``global_flat`` in place from the
cohort's weighted-average update Δ̄; a ``CohortStrategy``'s (registered with ``needs_updates=True``,
such as those of :mod:`~fedweb_engine.strategies.robust`) ``step(global_flat, updates, weights)``
from the round's ``[n, P]`` updates. ``state_dict()``/``load_state_dict()`` carry every optimizer
buffer through checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from fedweb_engine.components import registry
from fedweb_engine.components.contracts import CohortStrategy, StreamingStrategy
from fedweb_engine.spec.schema import AlgorithmSpec
from fedweb_engine.strategies.aggregate import accumulate_, divide_by_total_, weighted_average

# The strategy classes, re-exported (the catalogue of built-ins registers their factories).
from fedweb_engine.strategies.fedavg import FedAvg  # isort: skip
from fedweb_engine.strategies.fedavgm import FedAvgM  # isort: skip
from fedweb_engine.strategies.fedadam import FedAdam  # isort: skip
from fedweb_engine.strategies.fedyogi import FedYogi  # isort: skip
from fedweb_engine.strategies.fedadagrad import FedAdagrad  # isort: skip
from fedweb_engine.spec.validation import build

__all__ = [
    "FedAdagrad",
    "FedAdam",
    "FedAvg",
    "FedAvgM",
    "FedYogi",
    "CohortStrategy",
    "StreamingStrategy",
    "accumulate_",
    "build_strategy",
    "divide_by_total_",
    "needs_updates",
    "strategy_options",
    "weighted_average",
]


def build_strategy(
    spec: AlgorithmSpec, num_params: int, device: torch.device | str, options: Any = None
) -> StreamingStrategy | CohortStrategy:
    """The registered server strategy ``spec.name``, built with the spec's options (or ``options``,
    a mapping or the options dataclass, when given: tests and benchmarks), checked against the
    protocol it registered for."""
    component = registry.get("strategy", spec.name)
    chosen = spec.options if options is None else strategy_options(component, options)
    built = component.factory(num_params=num_params, device=device, lr=spec.server_lr, options=chosen)
    return component.check_built(built)


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
