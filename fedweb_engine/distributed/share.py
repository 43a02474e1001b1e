"""Which clients a rank trains, and the per-client rows it borrows from rank 0 for the round.

The plan does not depend on the number of ranks: every rank draws every trained client's batches
from the same generator, in the cohort's order (as an undistributed round does), then rank ``k``
takes the trained clients ``k, k + N, k + 2N, …``. Clients are sorted by their number of steps,
so dealing them out like cards gives each rank about the same work.

Per-client state (a client algorithm's rows, top-k's error-feedback residuals) stays with rank 0,
which alone reads and writes the files: before training, it sends each rank its clients' rows;
after, each rank sends them back and rank 0 stores them, as it would its own.
"""

from __future__ import annotations

import numpy as np
import torch

from fedweb_engine.distributed.group import RankGroup
from fedweb_engine.training.plan import Cohort, GroupPlan, assemble_group, bucket, draw_batches


def plan_share(
    rng: np.random.Generator,
    cohort: Cohort,
    offsets: np.ndarray,
    *,
    rank: int,
    size: int,
    group_size: int,
    epochs: int,
    batch_size: int,
) -> list[GroupPlan]:
    """The groups rank ``rank`` of ``size`` trains this round (every client's batches are drawn)."""
    batches = draw_batches(rng, cohort.trained, cohort.steps, offsets, epochs=epochs, batch_size=batch_size)
    ids, steps, rows = cohort.trained[rank::size], cohort.steps[rank::size], batches[rank::size]
    groups = []
    for first in range(0, len(ids), group_size):
        last = first + group_size
        slots = bucket(len(ids[first:last]), group_size)
        groups.append(
            assemble_group(
                ids[first:last], steps[first:last], rows[first:last], offsets, batch_size=batch_size, slots=slots
            )
        )
    return groups


def clients_of(cohort: Cohort, rank: int, size: int) -> torch.Tensor:
    """The trained clients of rank ``rank``, in the order it trains them."""
    return torch.as_tensor(np.asarray(cohort.trained[rank::size], dtype=np.int64))


class RankRows:
    """A member rank's per-client state store: the rows of this round's clients, lent by rank 0.

    It has the store interface the trainers use (gather, scatter, commit); rows live in memory for
    one round (``[clients of this rank, width]``) and never touch the files."""

    def __init__(self, name: str, num_clients: int, width: int):
        self.name, self.num_clients, self.width = name, num_clients, width
        self.ids = torch.zeros(0, dtype=torch.int64)
        self.rows = torch.zeros(0, width)
        self._where: dict[int, int] = {}

    def lend(self, ids: torch.Tensor, rows: torch.Tensor) -> None:
        """This round's clients and their rows (as rank 0's files hold them)."""
        self.ids, self.rows = ids, rows
        self._where = {int(c): i for i, c in enumerate(ids.tolist())}

    def gather(self, client_ids: torch.Tensor, device: torch.device) -> torch.Tensor:
        return self.rows[self._index(client_ids)].to(device)

    def scatter(self, client_ids: torch.Tensor, rows: torch.Tensor) -> None:
        self.rows[self._index(client_ids)] = rows.detach().to(self.rows.device, torch.float32)

    def commit(self, round_number: int) -> None:
        """Rank 0 commits the rows it was sent back; a member keeps nothing past the round."""

    def _index(self, client_ids: torch.Tensor) -> torch.Tensor:
        try:
            return torch.tensor([self._where[int(c)] for c in client_ids.tolist()], dtype=torch.int64)
        except KeyError as e:
            raise RuntimeError(f"client state {self.name!r}: client {e.args[0]} was not lent to this rank") from e


def lend_rows(group: RankGroup, cohort: Cohort, stores: dict, residuals: torch.Tensor | None) -> None:
    """Before training: rank 0 sends each rank its clients' rows (each store's, then the residuals')."""
    for k in range(1, group.size):
        ids = clients_of(cohort, k, group.size)
        if len(ids) == 0:
            continue
        for name in sorted(stores):
            store = stores[name]
            if group.rank == 0:
                group.send(store.gather(ids, group.wire).contiguous(), k)
            elif group.rank == k:
                rows = group.recv(torch.empty(len(ids), store.width, device=group.wire), 0)
                store.lend(ids, rows)
        if residuals is not None:
            _exchange(group, residuals, ids, 0, k)


def return_rows(group: RankGroup, cohort: Cohort, stores: dict, residuals: torch.Tensor | None) -> None:
    """After training: each rank sends its clients' rows back to rank 0, which stores them."""
    for k in range(1, group.size):
        ids = clients_of(cohort, k, group.size)
        if len(ids) == 0:
            continue
        for name in sorted(stores):
            store = stores[name]
            if group.rank == k:
                group.send(store.rows.to(group.wire).contiguous(), 0)
            elif group.rank == 0:
                store.scatter(ids, group.recv(torch.empty(len(ids), store.width, device=group.wire), k))
        if residuals is not None:
            _exchange(group, residuals, ids, k, 0)


def _exchange(group: RankGroup, table: torch.Tensor, ids: torch.Tensor, source: int, to: int) -> None:
    """Rows ``ids`` of ``table`` (one row per client, on any device) from rank ``source`` to rank ``to``."""
    if group.rank == source:
        group.send(table[ids.to(table.device)].to(group.wire).contiguous(), to)
    elif group.rank == to:
        rows = group.recv(torch.empty(len(ids), table.shape[1], device=group.wire), source)
        table[ids.to(table.device)] = rows.to(table.device)
