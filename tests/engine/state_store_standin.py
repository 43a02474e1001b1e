"""A test-only, in-memory stand-in for ``fedweb_engine.state.client_rows.ClientStateStore`` (issue 19,
part B, built in parallel): the same three methods on one dense tensor, with the same contract
(rows of a client never seen read as zeros; scattered rows are staged until ``commit``).
Product code never uses it: it lets the client-algorithm tests run before the real store lands."""

from __future__ import annotations

import torch


class InMemoryStateStore:
    def __init__(self, num_clients: int, width: int):
        self.rows = torch.zeros(num_clients, width)
        self.staged: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.committed_round: int | None = None

    def gather(self, client_ids: torch.Tensor, device: torch.device) -> torch.Tensor:
        return self.rows[client_ids.cpu()].to(device)

    def scatter(self, client_ids: torch.Tensor, rows: torch.Tensor) -> None:
        self.staged.append((client_ids.cpu().clone(), rows.detach().cpu().clone()))

    def commit(self, round_number: int) -> None:
        for ids, rows in self.staged:
            self.rows[ids] = rows
        self.staged.clear()
        self.committed_round = round_number


class InMemoryStates:
    """A ``client_state`` factory for :class:`~fedweb_engine.simulation.runner.Simulation` that keeps its stores."""

    def __init__(self):
        self.stores: dict[str, InMemoryStateStore] = {}

    def __call__(self, name: str, num_clients: int, width: int) -> InMemoryStateStore:
        self.stores[name] = InMemoryStateStore(num_clients, width)
        return self.stores[name]
