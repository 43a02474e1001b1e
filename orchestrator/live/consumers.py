"""WebSocket consumers: history from the database first, then live events, in order, no repeats.

Access is checked at connect, again on every ``access`` event (published whenever it may have
shrunk: a link revoked, a member removed, an experiment deleted...) and, as a safety net for
changes made behind the models' back, at least every ``ACCESS_RECHECK_SECONDS`` while rounds flow.
The experiment's ``access`` events and the safety net read the database once per process, user
and link (``Fanout.check_access``), not once per socket: 200 viewers of one public link cost one
query. Other events check nothing: access changes drive the checks. A socket that lost access is
closed with 4403 and forwards nothing more.

An experiment socket gets its live events through :mod:`orchestrator.live.fanout` (one subscription
per process and experiment; JSON and the public link's redaction done once per event; rounds
arriving faster than a page draws coalesced into one ``rounds`` message).
"""

from __future__ import annotations

import time
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from fedweb.inputs import parse_int
from orchestrator.experiments import access
from orchestrator.experiments.leak import latest_leak_warnings
from orchestrator.experiments.public import host_names, redact
from orchestrator.experiments.rounds import round_dict
from orchestrator.live import events
from orchestrator.live.fanout import RESYNC, Prepared, fanout_for
from orchestrator.models import FINISHED, Experiment, Gang, RoundMetric, Worker

FORBIDDEN = 4403  # WebSocket close code: "HTTP 403" in the private 4000-4999 range
ACCESS_RECHECK_SECONDS = 30.0


class _GroupsMixin:
    """Join groups, and leave all of them on disconnect."""

    async def join(self, *groups: str) -> None:
        for group in groups:
            await self.channel_layer.group_add(group, self.channel_name)
            self.joined.append(group)

    async def disconnect(self, code):
        for group in getattr(self, "joined", []):
            await self.channel_layer.group_discard(group, self.channel_name)
        if getattr(self, "fanout", None) is not None:
            await self.fanout.unsubscribe(self)

    async def forbid(self) -> None:
        """Close with 4403, once: two checks in flight together (the user's group and the
        experiment's both announced a change) may both find access gone."""
        self.allowed = False
        if not getattr(self, "forbidden", False):
            self.forbidden = True
            await self.close(code=FORBIDDEN)

    def user_groups(self) -> list[str]:
        user = self.scope.get("user")
        return [events.user_group_name(user.pk)] if user and user.is_authenticated else []


class ExperimentConsumer(_GroupsMixin, AsyncJsonWebsocketConsumer):
    """``/ws/experiments/<id>/?after=N``: rounds after N from the database, then live events.

    Signed-in users who may view the experiment, or anyone with its public link's ``?token=``.
    """

    async def connect(self):
        self.experiment_id = int(self.scope["url_route"]["kwargs"]["experiment_id"])
        self.last_round = _after(self.scope)
        self.share_token = _query(self.scope, "token")
        self.last_status = None
        self.joined: list[str] = []
        self.allowed = False
        await self.accept()  # accept first so the close code reaches the client
        if not await self._allowed():
            await self.forbid()
            return
        self.allowed, self.checked_at = True, time.monotonic()
        # Subscribe before reading history: an event published meanwhile waits in the backlog,
        # not lost, and the round handler drops it if the history already contained it.
        self.live, self.backlog = False, []
        self.fanout = fanout_for(self.channel_layer, events.group_name(self.experiment_id))
        await self.fanout.subscribe(self)
        await self.join(*self.user_groups())
        history, status = await self._history()
        for event in history:
            await self.round(event)
        await self.status(status)
        self.live = True
        for event, prepared in self.backlog:
            await self.deliver(event, prepared)
        self.backlog = []

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # read-only: controls go through views; a client's message is not even parsed

    # -- handlers named by events.*Event["type"] ---------------------------------------------

    async def deliver(self, event: dict, prepared: Prepared) -> None:
        """An event of the experiment's group, from the process's fan-out (``prepared`` holds its
        JSON and public variant, made once for every socket)."""
        if not self.allowed:
            return
        if not self.live:
            self.backlog.append((event, prepared))
            return
        kind = event["type"]
        if kind == "rounds":
            await self._rounds(event, prepared)
        elif kind == "round":
            await self.round(event, await prepared.text_for(public=bool(self.share_token)))
        elif kind == "status":
            await self.status(await prepared.public() if self.share_token else event, redacted=True)
        elif kind == "log":
            await self.send_json(await prepared.public() if self.share_token else event)
        elif kind == "access":  # the fan-out cleared its verdicts: the first socket per key reads again
            await self._still_allowed(shared=True)
        elif kind == RESYNC:  # this process's events may have been lost: the database has them
            history, status = await self._history()
            for round_event in history:
                await self.round(round_event)
            await self.status(status)

    async def access(self, event: events.AccessEvent):
        """The user's own group (a role or the account changed): this socket reads again."""
        if self.allowed:
            await self._still_allowed()

    async def round(self, event: events.RoundEvent, text: str | None = None):
        if not self.allowed or event["round"] <= self.last_round or not await self._recheck_due():
            return
        self.last_round = event["round"]
        if text is None and self.share_token:  # the public link names no worker host (orchestrator.experiments.public)
            event = {**event, "metrics": {**event["metrics"], "worker": ""}}
        await (self.send(text_data=text) if text is not None else self.send_json(event))

    async def _rounds(self, event: dict, prepared: Prepared) -> None:
        public = bool(self.share_token)
        event = await prepared.public() if public else event
        fresh, last = [], self.last_round
        for r in event["rounds"]:  # in order; a late copy inside the batch is dropped too
            if r["round"] > last:
                fresh.append(r)
                last = r["round"]
        if not fresh or not await self._recheck_due():
            return
        self.last_round = fresh[-1]["round"]
        if len(fresh) == len(event["rounds"]):
            await self.send(text_data=await prepared.text_for(public))  # the usual case: JSON made once for all
        elif len(fresh) == 1:
            await self.send_json(fresh[0])
        else:
            await self.send_json({**event, "rounds": fresh})

    async def _recheck_due(self) -> bool:
        """False when the safety-net check is due and finds access gone (the socket is closed)."""
        if time.monotonic() - self.checked_at > ACCESS_RECHECK_SECONDS:
            return await self._still_allowed(shared=True)
        return True

    async def status(self, event: events.StatusEvent, redacted: bool = False):
        """``redacted``: the fan-out already made the public link's variant (once for all sockets)."""
        if not self.allowed:
            return
        key = (event["status"], event["current_round"], event.get("final"))
        if key == self.last_status:
            return
        if event["status"] in FINISHED:
            # The run's last rounds may be recorded but their events not yet here (a cancel is
            # published while a round is still training): send them first, from the database.
            for round_event in await self._rounds_after(self.last_round):
                await self.round(round_event)
        self.last_status = key
        if self.share_token and not redacted:  # the public link's page names no worker host
            event = {**event, "worker": "", "error": await self._public_text(event["error"])}
        await self.send_json(event)

    # -- access and database ---------------------------------------------------------------------

    async def _still_allowed(self, shared: bool = False) -> bool:
        """``shared``: a verdict that another local socket of the same user and link read within
        ``ACCESS_RECHECK_SECONDS`` (or since the last ``access`` event) will do."""
        if shared:
            user = self.scope.get("user")
            key = (user.pk if user and user.is_authenticated else None, self.share_token)
            allowed = await self.fanout.check_access(key, self._allowed, ACCESS_RECHECK_SECONDS)
        else:
            allowed = await self._allowed()
        if allowed:
            self.checked_at = time.monotonic()
            return True
        await self.forbid()
        return False

    @database_sync_to_async
    def _allowed(self) -> bool:
        experiment = Experiment.objects.filter(pk=self.experiment_id).first()
        if experiment is None:
            return False
        return access.can_view(experiment, _current_user(self.scope)) or access.shares_with(
            experiment, self.share_token
        )

    @database_sync_to_async
    def _public_text(self, text: str) -> str:
        experiment = Experiment.objects.filter(pk=self.experiment_id).first()
        return redact(text, host_names(experiment)) if experiment else text

    @database_sync_to_async
    def _history(self) -> tuple[list[events.RoundEvent], events.StatusEvent]:
        experiment = Experiment.objects.get(pk=self.experiment_id)
        return _round_events(self.experiment_id, self.last_round), events.status_event(experiment)

    @database_sync_to_async
    def _rounds_after(self, after: int) -> list[events.RoundEvent]:
        return _round_events(self.experiment_id, after)


class WorkersConsumer(_GroupsMixin, AsyncJsonWebsocketConsumer):
    """``/ws/workers/``: the current workers, then their heartbeats, for signed-in users.

    A worker's current experiment is shown only to viewers who may read it (``access.for_viewer``).
    """

    async def connect(self):
        self.joined: list[str] = []
        self.allowed = False
        await self.accept()
        if await database_sync_to_async(_current_user)(self.scope) is None:
            await self.forbid()
            return
        self.allowed = True
        await self.join(events.WORKERS_GROUP, *self.user_groups())
        workers, queues = await self._current()
        await self.send_json(queues)
        for payload in workers:
            await self.send_json(payload)

    async def access(self, event: events.AccessEvent):
        if not self.allowed:
            return
        user = await database_sync_to_async(_current_user)(self.scope)
        if user is None:
            await self.forbid()
        else:
            self.scope["user"] = user  # e.g. no longer a superuser: the filter below uses the new rights

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # read-only, like the experiment socket

    async def worker(self, event: events.WorkerEvent):
        if self.allowed:
            await self.send_json(await self._for_viewer([event]))

    async def queues(self, event: events.QueuesEvent):
        if self.allowed:  # queue names and counts: the same for every signed-in viewer
            await self.send_json(event)

    @database_sync_to_async
    def _current(self) -> tuple[list[events.WorkerEvent], events.QueuesEvent]:
        gangs = list(Gang.objects.all())
        workers = [events.worker_event(w, gangs) for w in Worker.objects.select_related("current_experiment")]
        return access.workers_for_viewer(self.scope["user"], workers), events.queues_event()

    @database_sync_to_async
    def _for_viewer(self, payloads: list[events.WorkerEvent]) -> events.WorkerEvent:
        return access.workers_for_viewer(self.scope["user"], payloads)[0]


def _current_user(scope):
    """The socket's user as the database has it now (None if signed out, deactivated or deleted)."""
    user = scope.get("user")
    if not (user and user.is_authenticated):
        return None
    return get_user_model().objects.filter(pk=user.pk, is_active=True).first()


def _round_events(experiment_id: int, after: int) -> list[events.RoundEvent]:
    """Round events for the rounds after ``after``; the newest carries the leak verdict."""
    rows = RoundMetric.objects.filter(experiment_id=experiment_id, round__gt=after).order_by("round")
    out = [events.round_event(experiment_id, round_dict(row)) for row in rows]
    if out:
        out[-1]["leak_warnings"] = latest_leak_warnings(experiment_id)
    return out


def _query(scope, name: str, default: str = "") -> str:
    return parse_qs(scope.get("query_string", b"").decode()).get(name, [default])[0]


def _after(scope) -> int:
    return parse_int(_query(scope, "after", "0"), minimum=0) or 0
