"""The queues rounds wait in: who serves each one, how deep it is, and why a run is waiting.

The database is the source of truth for depth (experiments queued or running on a queue) and for
who serves a queue (workers whose heartbeat is recent, ``Worker.live()``). The broker's own
message count is an optional extra for the Workers page, read with a short timeout so a broker
that is away never fails a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from celery import current_app as app  # the Celery app (fedweb.celery), by name: the domain imports no glue
from django.conf import settings
from django.db.models import Avg, Count
from kombu import Connection

from fedweb_engine.components.provenance import has_plugin, label, required
from orchestrator.experiments.models import ACTIVE, Experiment, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.candidates import policy_for
from orchestrator.fleet.workers import Worker

BROKER_TIMEOUT_S = 1.0
START_HINT = "celery -A fedweb worker -Q {queue} --concurrency 1"


@dataclass(frozen=True)
class LiveWorker:
    hostname: str
    gpus: int  # GPUs the worker reports in its heartbeat (0: CPU only, or no NVML)
    plugins: list[dict] = field(default_factory=list, compare=False)  # registry.installed_plugins() it reports


@dataclass(frozen=True)
class QueueState:
    """One queue as the Workers page shows it."""

    name: str
    queued: int = 0
    running: int = 0
    workers: list[LiveWorker] = field(default_factory=list)
    messages: int | None = None  # the broker's count; None when not asked or not answering
    policy: str = "fifo"  # which ready round goes next (FEDWEB_POLICY; orchestrator/fleet/scheduling.py)

    @property
    def depth(self) -> int:
        return self.queued + self.running

    @property
    def reason(self) -> str:
        """Why nothing runs here, or "" when a live worker serves the queue."""
        if self.workers:
            return ""
        return f"waiting for a worker serving {self.name}" if self.depth else "no live worker"

    def to_dict(self) -> dict:
        return {
            "name": self.name, "queued": self.queued, "running": self.running, "depth": self.depth,
            "live_workers": len(self.workers), "messages": self.messages, "reason": self.reason,
            "policy": self.policy,
        }  # fmt: skip


def live_workers_by_queue() -> dict[str, list[LiveWorker]]:
    """Every queue some live worker serves, with those workers (one query)."""
    served: dict[str, list[LiveWorker]] = {}
    for worker in Worker.live().only("hostname", "queue", "devices", "plugins"):
        live = LiveWorker(worker.hostname, len(worker.devices or []), worker.plugins or [])
        for queue in worker.serve_queues():
            served.setdefault(queue, []).append(live)
    return served


def _active_counts() -> dict[str, dict[str, int]]:
    # {queue: {status: experiments}} for queued and running runs, in one query.
    counts: dict[str, dict[str, int]] = {}
    rows = Experiment.objects.filter(status__in=ACTIVE).exclude(queue__in=["", "inline"])
    for row in rows.values("queue", "status").annotate(n=Count("id")).order_by():
        counts.setdefault(row["queue"], {})[row["status"]] = row["n"]
    return counts


def queue_depths() -> dict[str, int]:
    """Runs queued or running per queue (the database's view: the source of truth)."""
    return {queue: sum(by_status.values()) for queue, by_status in _active_counts().items()}


def queue_states(*, broker: bool = False) -> list[QueueState]:
    """The configured queues, then any other queue a live worker serves or a run waits on."""
    served = live_workers_by_queue()
    counts = _active_counts()
    names = list(dict.fromkeys([*settings.FEDWEB_QUEUES, *sorted(served), *sorted(counts)]))
    messages = broker_message_counts(names) if broker else {}
    return [
        QueueState(
            name,
            queued=counts.get(name, {}).get(Status.QUEUED, 0),
            running=counts.get(name, {}).get(Status.RUNNING, 0),
            workers=served.get(name, []),
            messages=messages.get(name),
            policy=policy_for(name),
        )
        for name in names
    ]


def waiting_reason(
    queue: str, device: str, served: dict[str, list[LiveWorker]] | None = None, plugins: list[dict] | None = None
) -> str:
    """Why a run on ``queue`` for ``device`` cannot start now, or "" when a live worker can take it.

    "waiting for a worker serving gpu" when no live worker serves the queue; "no worker has plugin
    X 1.2.0" when none of them loaded a plugin the run recorded (``plugins``) at its recorded hash;
    "no live worker has GPU 7" when they report fewer GPUs than a ``cuda:7`` spec needs.
    """
    served = live_workers_by_queue() if served is None else served
    workers = served.get(queue, [])
    if not workers:
        return f"waiting for a worker serving {queue}"
    if plugins and (reason := _plugins_reason(workers, plugins)):
        return reason
    index = _gpu_index(device)
    if index is None or any(w.gpus > index for w in workers):
        return ""
    return f"no live worker has GPU {index}" if device[5:].isdigit() else "no live worker has a GPU"


def _plugins_reason(workers: list[LiveWorker], plugins: list[dict]) -> str:
    # The first plugin no worker has names it; if each is somewhere but none has them all, name them.
    needed = required(plugins)
    for need in needed:
        if not any(has_plugin(w.plugins, need) for w in workers):
            return f"no worker has plugin {label(need)}"
    if not any(all(has_plugin(w.plugins, need) for need in needed) for w in workers):
        return f"no worker has plugins {', '.join(label(n) for n in needed)} together"
    return ""


def run_waiting_reason(
    status: str, queue: str, spec: dict, served: dict[str, list[LiveWorker]] | None = None, plugins=None
) -> str:
    """The waiting reason of a queued or running run; "" for any other status or the inline queue."""
    if status not in ACTIVE or queue in ("", "inline"):
        return ""
    device = (spec.get("compute") or {}).get("device", "auto")
    return waiting_reason(queue, device, served, plugins)


def waiting_status(
    status: str,
    queue: str,
    spec: dict,
    served=None,
    depths: dict[str, int] | None = None,
    plugins=None,
    experiment_id: int | None = None,
):
    """What the dashboard's status line says while a run waits: ``{"queue", "depth", "reason",
    "text"}``, or None when it is not waiting. It waits for a worker (no live worker can take it:
    :func:`run_waiting_reason`) or, given ``experiment_id``, behind the runs the queue serves
    first (:func:`behind_reason`). ``served`` and ``depths`` save the queries when many runs are
    asked about at once; ``plugins`` is the run's recorded plugins (``Experiment.plugins``)."""
    reason = run_waiting_reason(status, queue, spec, served, plugins)
    if not reason and status == Status.QUEUED and experiment_id is not None and queue not in ("", "inline"):
        reason = behind_reason(experiment_id, queue, served)
    if not reason:
        return None
    depth = (queue_depths() if depths is None else depths).get(queue, 0)
    text = f"Queue {queue} · depth {depth} · {reason}"
    return {"queue": queue, "depth": depth, "reason": reason, "text": text}


def waiting_for(experiment) -> dict | None:
    """:func:`waiting_status` of one experiment (the dashboard and its status events)."""
    return waiting_status(
        experiment.status, experiment.queue, experiment.spec, plugins=experiment.plugins, experiment_id=experiment.pk
    )


def behind_reason(experiment_id: int, queue: str, served: dict[str, list[LiveWorker]] | None = None) -> str:
    """Why a queued run that a live worker could take has not started: "behind 1 running
    experiment on the cpu queue (fifo); about 4 min", or "" when nothing is ahead of it.

    Ahead: the queue's running runs and the runs queued before it, but for background runs (the
    demo), which yield to it: at most the round one of them is training, seconds. The time is each one's mean
    measured round seconds times its rounds left, shared by the live workers of the queue;
    "time unknown" when none of them has a measured round yet, "at least" when only some have.
    The queue's policy is named: under one other than fifo the order can change.
    """
    me = Experiment.objects.filter(pk=experiment_id).values("status", "queued_at", "created", "background").first()
    if me is None or me["status"] != Status.QUEUED:
        return ""
    others = Experiment.objects.filter(queue=queue, status__in=ACTIVE).exclude(pk=experiment_id)
    if not me["background"]:
        others = others.exclude(background=True)  # a background run (the demo) yields: it is never ahead
    mine = me["queued_at"] or me["created"]
    ahead = [
        row
        for row in others.values("pk", "status", "queued_at", "created", "current_round", "total_rounds")
        if row["status"] == Status.RUNNING or (row["queued_at"] or row["created"]) < mine
    ]
    if not ahead:
        return ""
    running = sum(row["status"] == Status.RUNNING for row in ahead)
    waiting = len(ahead) - running
    parts = [f"{n} {what}" for n, what in ((running, "running"), (waiting, "queued")) if n]
    noun = "experiment" if len(ahead) == 1 else "experiments"
    workers = len((live_workers_by_queue() if served is None else served).get(queue, [])) or 1
    return f"behind {' and '.join(parts)} {noun} on the {queue} queue ({policy_for(queue)}); {_eta(ahead, workers)}"


def _eta(ahead: list[dict], workers: int) -> str:
    # One aggregate query: the mean measured round time of each run ahead.
    means = dict(
        RoundMetric.objects.filter(experiment_id__in=[row["pk"] for row in ahead])
        .values("experiment_id")
        .annotate(mean=Avg("round_seconds"))
        .values_list("experiment_id", "mean")
    )
    measured = [row for row in ahead if means.get(row["pk"]) is not None]
    if not measured:
        return "time unknown (no round measured yet)"
    seconds = sum(means[row["pk"]] * max(0, row["total_rounds"] - row["current_round"]) for row in measured)
    text = _duration(seconds / workers)
    return f"at least {text}" if len(measured) < len(ahead) else text


def _duration(seconds: float) -> str:
    if seconds < 60:
        return "under 1 min"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"about {minutes} min"
    return f"about {minutes // 60} h {minutes % 60} min"


def submit_warnings(experiment) -> list[str]:
    """What to tell whoever just queued ``experiment`` when no live worker can take it (a warning,
    never a refusal: a worker may be started later)."""
    reason = run_waiting_reason(experiment.status, experiment.queue, experiment.spec, plugins=experiment.plugins)
    if not reason:
        return []
    if reason.startswith("waiting"):
        hint = f"Start one with `{START_HINT.format(queue=experiment.queue)}`."
    elif reason.startswith("no worker has plugin"):
        hint = "It waits until a worker that loaded that plugin (FEDWEB_PLUGINS) serves the queue."
    else:
        hint = "It waits until a worker with that GPU serves the queue."
    return [f"Queued on '{experiment.queue}': {reason}. {hint}"]


def broker_message_counts(names: list[str]) -> dict[str, int | None]:
    """Messages waiting in the broker per queue; {} when the broker does not answer in time."""
    # The broker this process sends rounds to, with short timeouts so a page never hangs on it.
    options = {
        **(app.conf.broker_transport_options or {}),
        "socket_timeout": BROKER_TIMEOUT_S,
        "socket_connect_timeout": BROKER_TIMEOUT_S,
    }
    try:
        with Connection(app.conf.broker_url, connect_timeout=BROKER_TIMEOUT_S, transport_options=options) as conn:
            conn.ensure_connection(max_retries=0, timeout=BROKER_TIMEOUT_S)
            return {name: _message_count(conn, name) for name in names}
    except Exception:  # away, refusing, or slow: the page shows the database's view only
        return {}


def _message_count(conn, name: str) -> int | None:
    try:
        with conn.channel() as channel:
            try:
                return channel.queue_declare(name, passive=True).message_count
            except Exception as e:
                if "NOT_FOUND" not in str(e):
                    raise
                # kombu's Redis transport says NOT_FOUND for an empty queue (Redis drops empty
                # lists) and, with a key prefix, for a full one too; its own length count is right.
                size = getattr(channel, "_size", None)
                return size(name) if size else 0
    except Exception:
        return None


def _gpu_index(device: str) -> int | None:
    # The GPU a spec needs, counted within what the worker sees: cuda and cuda:all need one.
    if not device.startswith("cuda"):
        return None
    suffix = device.partition(":")[2]
    return int(suffix) if suffix.isdigit() else 0
