"""Server strategies: pure aggregation functions plus one small class per algorithm.

Every strategy works on the model as one flat fp32 vector of P entries:
``strategy.step(global_flat, avg_update)`` updates ``global_flat`` in place from the cohort's
weighted-average update Δ̄, and ``state_dict()``/``load_state_dict()`` carry every optimizer
buffer through checkpoints.
"""

from __future__ import annotations

import torch

from workers.engine.spec import AlgorithmSpec
from workers.engine.strategies.aggregate import accumulate_, divide_by_total_, weighted_average
from workers.engine.strategies.fedadagrad import FedAdagrad
from workers.engine.strategies.fedadam import FedAdam
from workers.engine.strategies.fedavg import FedAvg
from workers.engine.strategies.fedavgm import FedAvgM
from workers.engine.strategies.fedprox import FedProx
from workers.engine.strategies.fedyogi import FedYogi

# Every strategy is a FedAvg: same step/state_dict/load_state_dict interface.
Strategy = FedAvg

__all__ = [
    "FedAdagrad",
    "FedAdam",
    "FedAvg",
    "FedAvgM",
    "FedProx",
    "FedYogi",
    "Strategy",
    "accumulate_",
    "build_strategy",
    "divide_by_total_",
    "weighted_average",
]


def build_strategy(spec: AlgorithmSpec, num_params: int, device: torch.device | str) -> Strategy:
    """The server strategy named by ``spec.name``, with the spec's knobs."""
    common = {"num_params": num_params, "device": device, "lr": spec.server_lr}
    adaptive = {"beta1": spec.beta1, "beta2": spec.beta2, "tau": spec.tau}
    if spec.name == "fedavg":
        return FedAvg(**common)
    if spec.name == "fedprox":
        return FedProx(**common)
    if spec.name == "fedavgm":
        return FedAvgM(**common, momentum=spec.server_momentum)
    if spec.name == "fedadam":
        return FedAdam(**common, **adaptive)
    if spec.name == "fedyogi":
        return FedYogi(**common, **adaptive)
    if spec.name == "fedadagrad":
        return FedAdagrad(**common, **adaptive)
    raise ValueError(f"unknown algorithm {spec.name!r}")
