"""A stand-in client algorithm with per-client state, until the algorithm hooks land (issue 19):
each round it gathers the cohort's rows, lets them move the server update, and scatters new rows
that depend on the global model, so a run is exact only if every round reads exactly the rows the
round before left (as SCAFFOLD's control variates must be)."""

import numpy as np
import torch

from fedweb_engine.simulation.runner import Simulation

WIDTH = 16


def install(monkeypatch) -> None:
    train_cohort, init = Simulation._train_cohort, Simulation.__init__

    def opening_its_store(self: Simulation, *args, **kwargs):
        init(self, *args, **kwargs)
        self.client_states.open("toy", len(self.sizes), WIDTH)  # at construction, as the algorithms do

    monkeypatch.setattr(Simulation, "__init__", opening_its_store)

    def with_client_state(self: Simulation, cohort, clip_norm=None):
        stats = train_cohort(self, cohort, clip_norm)
        store = self.client_states.open("toy", len(self.sizes), WIDTH)
        ids = torch.as_tensor(np.asarray(cohort.trained, dtype=np.int64))
        rows = store.gather(ids, self.device)
        self.update_sum[:WIDTH] += rows.sum(0) * 0.01 * float(stats["weight"]) / max(1, len(ids))
        store.scatter(ids, rows * 0.5 + self.global_flat[:WIDTH] + 1.0)
        return stats

    monkeypatch.setattr(Simulation, "_train_cohort", with_client_state)


def rows(sim: Simulation) -> torch.Tensor:
    """Every client's row of the toy state, as the simulation's store reads it now."""
    return sim.client_states.open("toy", len(sim.sizes), WIDTH).gather(torch.arange(len(sim.sizes)), sim.device)
