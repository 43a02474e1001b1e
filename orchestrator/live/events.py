"""The one module that owns WebSocket payloads and sends them to channel groups.

Each payload is a TypedDict whose ``type`` names the consumer handler that forwards it
(``round`` -> ``ExperimentConsumer.round``); the browser receives the same dict as JSON.
Nothing else in FedWeb calls ``group_send``.

Publishing never raises: the database is the source of truth, and a client that missed an event
because Redis was away gets it from the database when it reconnects with ``?after=N``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Literal, TypedDict

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction

from orchestrator.experiments.leak import latest_leak_warnings, reads_memory
from orchestrator.fleet.gangs import role_of
from orchestrator.fleet.queues import queue_states, waiting_for

log = logging.getLogger(__name__)

WORKERS_GROUP = "workers"


class RoundEvent(TypedDict):
    type: Literal["round"]
    experiment_id: int
    round: int
    metrics: dict  # every RoundResult field
    # The memory-leak verdict after this round (orchestrator.experiments.leak), so the page keeps no copy of the
    # heuristic; None on history replayed before the newest round (the page keeps its badge).
    leak_warnings: list[str] | None
    # Unix time just after the round was stored (live events only; None on history): the viewers
    # benchmark measures delivery from it, and a page may show how fresh a round is.
    published_at: float | None


class RoundsEvent(TypedDict):
    """Consecutive rounds of one run as one message (a batch of reported rounds, or rounds queued
    together): one channel-layer send, and one message to each socket."""

    type: Literal["rounds"]
    experiment_id: int
    rounds: list[RoundEvent]


class StatusEvent(TypedDict):
    type: Literal["status"]
    experiment_id: int
    status: str
    current_round: int
    total_rounds: int
    error: str
    # What the status line shows, so the page needs no other request after a status change.
    # ``worker`` is "" on the public link's socket (it names no worker host: orchestrator.experiments.public).
    started: str | None
    finished: str | None
    worker: str
    waiting: dict | None  # orchestrator.fleet.queues.waiting_status: why no worker takes the run yet
    # Terminal status and no round still being trained: nothing more will come, the page may close.
    # A cancel is published while the last round may still be running; its round event comes later.
    final: bool


class LogEvent(TypedDict):
    type: Literal["log"]
    experiment_id: int
    time: str
    level: str
    message: str


class WorkerEvent(TypedDict):
    type: Literal["worker"]
    hostname: str
    queue: str
    devices: list
    plugins: list  # registry.installed_plugins(): [{"name", "version", "hash", "components"}]
    last_heartbeat: str
    current_experiment_id: int | None  # None also when the viewer may not read that experiment
    current_experiment_name: str  # "" likewise
    busy: bool
    gang: dict | None  # {"rank", "ranks", "leader", "members"} while it is a rank of a gang
    lost: bool
    lost_at: str  # when it counts as lost if no heartbeat comes: the page marks it then by itself


class QueuesEvent(TypedDict):
    """The queue table of the Workers page (``QueueState.to_dict()`` each): names and counts only."""

    type: Literal["queues"]
    queues: list[dict]


class SearchEvent(TypedDict):
    """A sweep's search decided (a run waits, stops or is promoted, a configuration is created): the
    sweep's sockets refetch the page's parts and join the groups of runs created since they connected."""

    type: Literal["search"]
    sweep_id: int


class AccessEvent(TypedDict):
    """Who may read an experiment may have changed: every socket that gets it checks again."""

    type: Literal["access"]


def group_name(experiment_id: int) -> str:
    return f"experiment-{experiment_id}"


def sweep_group_name(sweep_id: int) -> str:
    return f"sweep-{sweep_id}"


def user_group_name(user_id: int) -> str:
    """Every socket a signed-in user has open joins this group (team roles and accounts change)."""
    return f"user-{user_id}"


def round_event(
    experiment_id: int, metrics: dict, leak_warnings: list[str] | None = None, published_at: float | None = None
) -> RoundEvent:
    return {
        "type": "round",
        "experiment_id": experiment_id,
        "round": metrics["round"],
        "metrics": metrics,
        "leak_warnings": leak_warnings,
        "published_at": published_at,
    }


def _iso(moment) -> str | None:
    return moment.isoformat() if moment else None


def status_event(experiment) -> StatusEvent:
    return {
        "type": "status",
        "experiment_id": experiment.pk,
        "status": experiment.status,
        "current_round": experiment.current_round,
        "total_rounds": experiment.total_rounds,
        "error": experiment.error,
        "started": _iso(experiment.started),
        "finished": _iso(experiment.finished),
        "worker": experiment.worker,
        "waiting": waiting_for(experiment),
        "final": experiment.is_settled,
    }


def log_event(event) -> LogEvent:
    return {
        "type": "log",
        "experiment_id": event.experiment_id,
        "time": event.time.isoformat(),
        "level": event.level,
        "message": event.message,
    }


def worker_event(worker, gangs: list | None = None) -> WorkerEvent:
    """``gangs``: the current gangs when the caller read them once for many workers (else read here)."""
    return {
        "type": "worker",
        "hostname": worker.hostname,
        "queue": worker.queue,
        "devices": worker.devices,
        "plugins": worker.plugins or [],
        "last_heartbeat": worker.last_heartbeat.isoformat(),
        "current_experiment_id": worker.current_experiment_id,
        "current_experiment_name": worker.current_experiment.name if worker.current_experiment_id else "",
        "busy": worker.current_experiment_id is not None,
        "gang": role_of(worker.hostname, gangs),  # a rank of a distributed run's group, or None
        "lost": worker.is_lost,
        "lost_at": (worker.last_heartbeat + timedelta(seconds=settings.WORKER_LOST_AFTER)).isoformat(),
    }


def publish_round(experiment_id: int, metrics: dict) -> None:
    stored = time.time()  # the round's row and current_round are written by now
    _send(group_name(experiment_id), round_event(experiment_id, metrics, latest_leak_warnings(experiment_id), stored))


def publish_rounds(experiment_id: int, rounds: list[dict]) -> None:
    """Several rounds of one run, in order, as one channel-layer message (an external run's batch).

    One send per batch, not per round, and only the last round carries the leak verdict (one query
    per batch; the others' None keeps the page's badge). A batch with no memory number (an external
    run that reports none) cannot change the verdict: its rounds all carry None, and no query is made.
    """
    if not rounds:
        return
    stored = time.time()
    warnings = latest_leak_warnings(experiment_id) if reads_memory(rounds) else None
    last = len(rounds) - 1
    events = [round_event(experiment_id, m, warnings if i == last else None, stored) for i, m in enumerate(rounds)]
    _send_all(group_name(experiment_id), events)


def publish_status(experiment) -> None:
    _send(group_name(experiment.pk), status_event(experiment))


def publish_search(sweep_id: int) -> None:
    """Sent once the decision commits: a socket that refetches then reads it (and its new runs)."""
    event: SearchEvent = {"type": "search", "sweep_id": sweep_id}
    transaction.on_commit(lambda: _send(sweep_group_name(sweep_id), event))


def publish_log(event) -> None:
    _send(group_name(event.experiment_id), log_event(event))


def publish_worker(worker) -> None:
    _send(WORKERS_GROUP, worker_event(worker))


def queues_event(table: list[dict] | None = None) -> QueuesEvent:
    rows = [q.to_dict() for q in queue_states(broker=True)] if table is None else table
    return {"type": "queues", "queues": rows}


def publish_queues(table: list[dict] | None = None) -> None:
    """The queue table (``QueueState.to_dict()`` rows; read now when not given). One worker sends
    it for the fleet when it changes (``workers.heartbeat.QueueTable``): workers come and go, runs
    queue and finish, and the broker's counts change with no other event to say so."""
    _send(WORKERS_GROUP, queues_event(table))


def publish_access_changed(*, experiment_ids: Iterable[int] = (), user_ids: Iterable[int] = ()) -> None:
    """Make every open socket of these experiments and users check its access again.

    Sent once the current transaction commits, so the check sees the change (or nothing, on rollback).
    """
    groups = [group_name(pk) for pk in experiment_ids] + [user_group_name(pk) for pk in user_ids]
    event: AccessEvent = {"type": "access"}

    def send() -> None:
        for group in groups:
            _send(group, event)

    if groups:
        transaction.on_commit(send)


def _send(group: str, payload: dict) -> None:
    _send_all(group, [payload])


def _send_all(group: str, payloads: list[dict]) -> None:
    """Send ``payloads`` to ``group`` in order before returning (consecutive rounds as one message).

    Before returning, not handed to the event loop for later: an ingestion request is answered only
    once its rounds are on their way, so the client's next report, even one that another web
    process takes (FEDWEB_WEB_PROCESSES), is published after them, and a socket (which drops a round
    older than the last it showed) never sees them out of order. A hand-over queue per process was
    tried (issue 20): it freed daphne's sync thread sooner, but lost that order across processes,
    and one benchmark run missed the last rounds of a run with no explanation found. The speed came
    from the batching (one channel-layer send per report, not per round), which stays.
    Sending never raises: a failed send is logged, and the database still has what it announced.
    """
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(_send_in_order)(layer, group, payloads)
    except Exception:  # Redis down: what the events announce is already in the database
        log.warning("could not publish %s event(s) to %s", payloads[0]["type"], group, exc_info=True)


async def _send_in_order(layer, group: str, payloads: list[dict]) -> None:
    # Shielded: Django cancels a request whose client hung up (e.g. a report's client that timed out
    # and will resend), and asgiref cancels with it the send its thread waits for here. What these
    # events announce is committed by now, and the resend finds it recorded and announces nothing:
    # cancelled, the send would lose the rounds' live event for good.
    await asyncio.shield(_send_each(layer, group, payloads))


async def _send_each(layer, group: str, payloads: list[dict]) -> None:
    for payload in _rounds_together(payloads):
        await layer.group_send(group, payload)


def _rounds_together(payloads: list[dict]) -> list[dict]:
    """``payloads`` in order, each run of consecutive round events as one ``rounds`` event: a send
    per round was a few Redis round trips per round on a loop that also serves every socket."""
    out: list[dict] = []
    for payload in payloads:
        if payload["type"] == "round" and out and out[-1]["type"] in ("round", "rounds"):
            previous = out.pop()
            rounds = previous["rounds"] if previous["type"] == "rounds" else [previous]
            batch: RoundsEvent = {
                "type": "rounds",
                "experiment_id": payload["experiment_id"],
                "rounds": [*rounds, payload],
            }
            out.append(batch)
        else:
            out.append(payload)
    return out
