"""The round state: ``Simulation.state_dict`` less what the next round overwrites before reading.

Published after every round (workers/round_state.py), so it should be small. Of the state, the
broadcast weights (``"received"``) matter at a round boundary only for a top-k downlink, which sends
the change since the last broadcast; every other downlink rewrites them whole from the global model
before anyone reads them (``Simulation._broadcast``, also for sharded rounds). Leaving them out
halves the file for the fp32 default, and the next round is bit-identical.
"""

from __future__ import annotations

import torch

from fedweb_engine.simulation.runner import Simulation


def compact_state(sim: Simulation) -> tuple[dict[str, torch.Tensor], dict]:
    """The tensors and metadata the next round of ``sim`` needs."""
    tensors, meta = sim.state_dict()
    if sim.spec.communication.downlink.name != "topk":
        del tensors["received"]
    return tensors, meta


def complete_state(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` as ``Simulation.load_state_dict`` takes them (any value serves where left out)."""
    return tensors if "received" in tensors else {**tensors, "received": tensors["global"]}
