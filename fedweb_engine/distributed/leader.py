"""Rank 0's handle on a hold: the store the members meet through, the group, and the commands that
open the simulation on every rank and start each round.

A hold lasts as long as its holder keeps the experiment (the engine's CLI for a whole run, a worker
while the experiment's rounds keep coming to it): the members build their simulation and the group
forms once (``open``), then each round is one ``round`` command and the round itself. Any failure
(a member that dies, stalls past the timeout or raises) is a :class:`RankFailure`; the hold is then
closed and the round was not completed, so the caller runs it again, with any number of ranks.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import torch.distributed as dist

from fedweb_engine.distributed.group import RankFailure, RankGroup
from fedweb_engine.distributed.rank_round import run_rank_round
from fedweb_engine.results.round_result import RoundResult
from fedweb_engine.simulation.runner import Simulation

FIRST_ROUND_TIMEOUT = 120.0  # seconds a collective may wait before any round was measured
MIN_TIMEOUT = 30.0
TIMEOUT_FACTOR = 4.0  # × the slowest rank's training time of the last round
POLL_SECONDS = 0.2


def collective_timeout(last_round_seconds: float | None, setting: float | None = None) -> float:
    """How long a rank waits in a collective: ``setting`` when given, else a multiple of what the
    last round's slowest rank took to train (a rank waits at most that long for the others), at
    least ``MIN_TIMEOUT``; before any round, ``FIRST_ROUND_TIMEOUT``."""
    if setting:
        return float(setting)
    if last_round_seconds is None:
        return FIRST_ROUND_TIMEOUT
    return max(MIN_TIMEOUT, TIMEOUT_FACTOR * last_round_seconds)


def open_store(host: str = "127.0.0.1", port: int = 0, size: int = 1) -> dist.TCPStore:
    """A TCPStore served by this process (``port`` 0: a free one; read it back from ``.port``)."""
    return dist.TCPStore(host, port, size, True, timeout=datetime.timedelta(seconds=60), wait_for_workers=False)


@dataclass
class Hold:
    """Rank 0 of a group of ``size`` ranks holding one simulation.

    ``alive`` (optional) tells which member ranks are known dead (local processes that exited), so a
    wait ends as soon as one dies instead of at its timeout.
    """

    store: dist.TCPStore
    size: int
    label: str  # rank 0's worker and device
    address: str | None = None  # the interface rank 0's connections bind (None: the host name's address)
    join_timeout: float = 120.0
    timeout_setting: float | None = None  # seconds; None: collective_timeout's rule
    dead: Callable[[], list[int]] = lambda: []
    group: RankGroup | None = None
    labels: list[str] = field(default_factory=list)
    last_train_seconds: float | None = None
    setup_seconds: float | None = None  # the group's rendezvous and connection, once per hold
    open_seconds: float | None = None  # members' simulations built and data loaded, once per hold
    _seq: int = 0

    def open(self, sim: Simulation, state_path: str | None) -> None:
        """Build the simulation on every member (at ``sim``'s round, from ``state_path``: the round
        state that round published; None at round 0) and form the group."""
        started = time.perf_counter()
        name = f"group-{uuid.uuid4().hex[:12]}/"
        seq = self._command(
            op="open", spec=sim.spec.to_dict(), state=state_path, round=sim.round, group=name,
            join_timeout=self.join_timeout,
        )  # fmt: skip
        self._wait_for([f"ready/{seq}/{k}" for k in range(1, self.size)], self.join_timeout, "build its simulation")
        self.open_seconds = time.perf_counter() - started
        self.group = RankGroup.join(
            dist.PrefixStore(name, self.store), 0, self.size, device=sim.device, timeout=self.join_timeout,
            address=self.address,
        )  # fmt: skip
        self.setup_seconds = self.group.setup_seconds
        self.labels = [self.label, *(self.store.get(f"label/{k}").decode() for k in range(1, self.size))]

    def run_round(self, sim: Simulation) -> RoundResult:
        """The simulation's next round over the group (rank 0's part, the members doing theirs)."""
        if self.group is None:
            raise RankFailure("the hold is not open")
        timeout = collective_timeout(self.last_train_seconds, self.timeout_setting)
        self.group.set_timeout(timeout)
        self._command(op="round", round=sim.round + 1, timeout=timeout)
        try:
            result = run_rank_round(sim, self.group, self.labels)
        except RankFailure as e:
            raise RankFailure(self._explain(e)) from e
        self.last_train_seconds = max(result.rank_train_seconds or [result.train_seconds])
        return result

    def close(self) -> None:
        """End the hold: the members leave (their group and simulation go), the group is dropped."""
        try:
            self._command(op="close")
        except Exception:  # the store's server is this process: only a broken socket fails here
            pass
        if self.group is not None:
            self.group.close()
            self.group = None

    def _command(self, **command) -> int:
        seq = self._seq
        self.store.set(f"cmd/{seq}", json.dumps(command))
        if seq >= 2:
            self.store.delete_key(f"cmd/{seq - 2}")  # members read each command once: keep the store small
        self._seq += 1
        return seq + 1  # the members' count after reading it (their reply keys use it)

    def _wait_for(self, keys: list[str], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            missing = [k for k in keys if not self.store.check([k])]
            if not missing:
                return
            failed = self._errors() or [f"rank {k} exited" for k in self.dead()]
            if failed:
                raise RankFailure(f"a member rank could not {what}: {'; '.join(failed)}")
            if time.monotonic() > deadline:
                ranks = ", ".join(k.rsplit("/", 1)[1] for k in missing)
                raise RankFailure(f"rank(s) {ranks} did not {what} within {timeout:.0f} s")
            time.sleep(POLL_SECONDS)

    def _errors(self) -> list[str]:
        found = []
        for k in range(1, self.size):
            if self.store.check([f"error/{k}"]):
                found.append(f"rank {k}: {self.store.get(f'error/{k}').decode()}")
        return found

    def _explain(self, error: RankFailure) -> str:
        """The failure as rank 0 saw it, with what a member reported or which one exited."""
        time.sleep(POLL_SECONDS)  # a member that raised writes its error as it leaves
        why = self._errors() + [f"rank {k} exited" for k in self.dead()]
        where = f" ({'; '.join(why)})" if why else ""
        return f"{error}{where}"
