"""Distributed rounds in a worker: the ranks a leader holds for an experiment, and a recruited
member's side (``serve_rank``).

Where ranks come from, in order: the worker's own devices (``FEDWEB_WORKER_DEVICES``: ranks 1.. are
its child processes, alive while it holds the experiment), else idle workers of the queue recruited
into a gang (``orchestrator.fleet.gangs``). With fewer free than asked for, the round runs on those
there are, down to one: the results do not depend on the number of ranks, so waiting would only
delay them. A group that does not form in time costs that wait, and the round runs on one rank.
"""

from __future__ import annotations

import datetime
import logging
import socket
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from django.conf import settings

from fedweb_engine.distributed.group import RankFailure
from fedweb_engine.distributed.leader import Hold, open_store
from fedweb_engine.distributed.local import LocalMembers, local_hold
from fedweb_engine.distributed.member import serve
from fedweb_engine.simulation.runner import Simulation
from orchestrator.experiments.limits import datasets_root
from orchestrator.fleet import gangs
from orchestrator.models import Experiment, Worker
from workers import faults, round_state
from workers.progress import LogLine

log = logging.getLogger(__name__)

# Members of a gang that failed are not recruited again for this long (seconds): a worker killed
# mid-round still looks alive until its heartbeat is stale.
FAILED_MEMBER_COOLDOWN = 60.0
_failed_members: dict[str, float] = {}


@dataclass
class RankHold:
    """A leader's ranks for one experiment: the engine's hold, and where its members came from."""

    hold: Hold
    local: LocalMembers | None = None
    gang_id: int | None = None

    @property
    def size(self) -> int:
        return self.hold.size

    def close(self) -> None:
        self.hold.close()
        if self.local is not None:
            self.local.stop()
        if self.gang_id is not None:
            gangs.dissolve(self.gang_id)


def wanted_ranks(sim: Simulation) -> int:
    """The ranks the spec asks for (``auto``: FEDWEB_MAX_RANKS, as many as are free; ``cuda:all`` with
    the default one rank: one per GPU of this worker)."""
    compute = sim.spec.compute
    if compute.ranks == 1 and compute.device == "cuda:all":
        return max(1, len(local_devices(sim.spec)))
    return compute.ranks or settings.FEDWEB_MAX_RANKS


def local_devices(spec) -> list[torch.device]:
    """This worker's own devices for a run, one rank each: FEDWEB_WORKER_DEVICES (all on the CPU for a
    spec that asks for the CPU), else every GPU for ``cuda:all``; empty: one rank, on the spec's device."""
    configured = settings.FEDWEB_WORKER_DEVICES
    if configured:
        return [torch.device("cpu" if spec.compute.device == "cpu" else d) for d in configured]
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if spec.compute.device == "cuda:all" and gpus > 1:
        return [torch.device(f"cuda:{k}") for k in range(gpus)]
    return []


def rank0_device(spec) -> str | None:
    """Where a worker builds its simulation (rank 0, or the one rank): its first own device, if any."""
    devices = local_devices(spec)
    return str(devices[0]) if devices else None


def open_hold(experiment: Experiment, sim: Simulation, worker: str, log_line: LogLine) -> RankHold | None:
    """Ranks for ``sim``'s next round, formed and holding the simulation at its round; None: one rank."""
    want = wanted_ranks(sim)
    devices = local_devices(sim.spec)
    if len(devices) >= 2:
        hold, members = local_hold(
            devices[: min(want, len(devices))], label=worker, data_root=str(datasets_root()),
            join_timeout=settings.FEDWEB_RANK_JOIN_TIMEOUT, timeout=settings.FEDWEB_RANK_TIMEOUT,
        )  # fmt: skip
        ranks = RankHold(hold, local=members)
        source = f"this worker's devices ({', '.join(map(str, devices[: hold.size]))})"
    else:
        ranks = _gang(experiment, sim, worker, want - 1)
        if ranks is None:
            log_line("info", f"Round {sim.round + 1}: no idle worker to recruit; it runs on one rank")
            return None
        source = "workers " + ", ".join(gangs.Gang.objects.get(pk=ranks.gang_id).members)
    try:
        ranks.hold.open(sim, _state_for_members(experiment, sim))
    except RankFailure as e:
        ranks.close()
        log_line(
            "warning", f"Round {sim.round + 1}: the group of {ranks.size} ranks did not form ({e}); it runs on one rank"
        )
        return None
    log_line(
        "info",
        f"Round {sim.round + 1}: {ranks.size} ranks ({ranks.hold.group.backend}) with {source}: group formed in "
        f"{ranks.hold.setup_seconds:.2f} s, members' simulations built in {ranks.hold.open_seconds:.2f} s",
    )
    return ranks


def run_round(ranks: RankHold, sim: Simulation):
    """The simulation's next round over the held ranks; a failed rank closes the hold and the
    members of a gang are not recruited again for a while."""
    try:
        return ranks.hold.run_round(sim)
    except RankFailure:
        if ranks.gang_id is not None:
            gang = gangs.Gang.objects.filter(pk=ranks.gang_id).first()
            for hostname in gang.members if gang else []:
                _failed_members[hostname] = time.monotonic()
        ranks.close()
        raise


def _gang(experiment: Experiment, sim: Simulation, worker: str, want: int) -> RankHold | None:
    now = time.monotonic()
    exclude = {h for h, t in _failed_members.items() if now - t < FAILED_MEMBER_COOLDOWN}
    members = gangs.recruit(experiment, worker, want, exclude=exclude) if want > 0 else []
    if not members:
        return None
    host = settings.FEDWEB_RANK_ADDRESS or socket.gethostbyname(socket.gethostname())
    store = open_store(host, 0, 1 + len(members))
    gang = gangs.form(experiment, worker, members, f"{host}:{store.port}")
    hold = Hold(
        store, gang.ranks, f"{worker} {sim.device}", address=host, join_timeout=settings.FEDWEB_RANK_JOIN_TIMEOUT,
        timeout_setting=settings.FEDWEB_RANK_TIMEOUT,
    )  # fmt: skip
    return RankHold(hold, gang_id=gang.pk)


def _state_for_members(experiment: Experiment, sim: Simulation) -> str | None:
    """The round state the members start from: the one the simulation's round published (written
    again when the crash path replayed to it and none was)."""
    if sim.round == 0:
        return None
    path = round_state.state_path(experiment.pk, sim.round)
    if round_state.read(path, sim.round) is None:
        round_state.publish(experiment.pk, sim)
    return str(path)


def serve_rank(experiment_id: int, gang_id: int, rank: int, size: int, address: str, *, worker: str) -> str:
    """Serve as rank ``rank`` of gang ``gang_id`` until its leader closes it, goes away, or leaves it
    idle for FEDWEB_GANG_IDLE seconds; returns why it stopped."""
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None or not gangs.is_member(gang_id, experiment_id, worker):
        return "gone"  # dissolved before this task started: the leader ran without it
    Worker.objects.filter(hostname=worker).update(current_experiment=experiment)
    host, port = address.rsplit(":", 1)
    device = member_device(experiment)
    try:
        store = dist.TCPStore(host, int(port), size, False, timeout=_seconds(settings.FEDWEB_RANK_JOIN_TIMEOUT))
        why = serve(
            store, rank, size, device=device, label=f"{worker} {device}", idle_timeout=settings.FEDWEB_GANG_IDLE,
            data_root=str(datasets_root()), address=settings.FEDWEB_RANK_ADDRESS or None,
            on_round_start=lambda r: faults.crash_point("rank-round", r),
        )  # fmt: skip
    except (RankFailure, dist.DistStoreError, ConnectionError, RuntimeError) as e:
        why = f"failed: {e}"
        log.warning("rank %s of gang %s (experiment %s) stopped: %s", rank, gang_id, experiment_id, e)
    finally:
        Worker.objects.filter(hostname=worker, current_experiment_id=experiment_id).update(current_experiment=None)
    return why


def member_device(experiment: Experiment) -> torch.device:
    """A recruited worker's rank runs on its first own device (FEDWEB_WORKER_DEVICES), else on the one
    the spec asks for (CUDA when ``auto`` and there is a GPU)."""
    spec = experiment.parsed_spec()
    first = rank0_device(spec)
    if first is not None:
        return torch.device(first)
    device = spec.compute.device
    if device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda:0" if device in ("auto", "cuda", "cuda:all") else device)


def _seconds(n: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=n)
