"""How a round's updates reach the server strategy: one class per strategy protocol.

A :class:`~fedweb_engine.components.contracts.StreamingStrategy` steps on the clients' weighted
mean, which the training sums as updates arrive (memory flat whatever the cohort); a
:class:`~fedweb_engine.components.contracts.CohortStrategy` steps on every aggregated client's
update, which the training writes into one buffer sized once for the largest cohort. Which one a
simulation uses is the protocol its strategy registered for (and was checked against): the round
itself never asks.
"""

from __future__ import annotations

import torch

from fedweb_engine.components import registry
from fedweb_engine.components.contracts import CohortStrategy, StreamingStrategy, strategy_protocol
from fedweb_engine.simulation.algorithm_share import SimulationState as Simulation  # the runner's, as the steps see it
from fedweb_engine.spec.schema import Spec
from fedweb_engine.strategies.aggregate import divide_by_total_
from fedweb_engine.training.dispatch import Collected
from fedweb_engine.training.plan import Cohort


class StreamingStep:
    """The server steps on the mean of the summed updates (under DP: their privatised mean)."""

    collected: Collected | None = None  # the training sums; it keeps no rows

    def __init__(self, strategy: StreamingStrategy):
        self.strategy = strategy

    def step(self, sim: Simulation, cohort: Cohort, stats: dict[str, torch.Tensor]) -> None:
        if sim.dp:
            avg = sim.dp.privatise_(sim.update_sum, len(cohort.clients), sim.rng)
        else:
            avg = divide_by_total_(sim.update_sum, stats["weight"])
        sim._fold_client(avg)
        self.strategy.step(sim.global_flat, avg)


class CohortStep:
    """The server steps on the round's collected rows: one per aggregated client, in plan order."""

    def __init__(self, strategy: CohortStrategy, collected: Collected):
        self.strategy = strategy
        self.collected = collected

    def step(self, sim: Simulation, cohort: Cohort, stats: dict[str, torch.Tensor]) -> None:
        n = int(stats["rows"])
        sim._fold_client(None)  # the averaged update is never formed: the client algorithm folds its sums alone
        self.strategy.step(sim.global_flat, self.collected.updates[:n], self.collected.weights[:n])


def server_step(
    spec: Spec, strategy: StreamingStrategy | CohortStrategy, num_params: int, device: torch.device
) -> StreamingStep | CohortStep:
    """The server's half of every round for ``strategy``, by the protocol it registered for."""
    protocol = strategy_protocol(registry.get("strategy", spec.algorithm.name).traits)
    if protocol is CohortStrategy:
        return CohortStep(strategy, Collected.for_spec(spec, num_params, device))
    return StreamingStep(strategy)
