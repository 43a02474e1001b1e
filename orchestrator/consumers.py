"""WebSocket consumers: history from the database first, then live events, in order, no repeats."""

from __future__ import annotations

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from fedweb.inputs import parse_int
from orchestrator import events
from orchestrator.models import Experiment, RoundMetric, Worker

FORBIDDEN = 4403  # WebSocket close code: "HTTP 403" in the private 4000-4999 range


class ExperimentConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/experiments/<id>/?after=N``: rounds after N from the database, then live events.

    Signed-in users who may view the experiment, or anyone with its public link's ``?token=``.
    """

    async def connect(self):
        self.experiment_id = int(self.scope["url_route"]["kwargs"]["experiment_id"])
        self.last_round = _after(self.scope)
        self.share_token = _query(self.scope, "token")
        self.last_status = None
        await self.accept()  # accept first so the close code reaches the client
        if not await self._allowed():
            await self.close(code=FORBIDDEN)
            return
        # Subscribe before reading history: an event published meanwhile is queued, not lost,
        # and the round handler drops it if the history already contained it.
        self.group = events.group_name(self.experiment_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        history, status = await self._history()
        for metrics in history:
            await self.round(events.round_event(self.experiment_id, metrics))
        await self.status(status, recheck=False)

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # read-only: controls go through views; a client's message is not even parsed

    # -- handlers named by events.*Event["type"] ---------------------------------------------

    async def round(self, event: events.RoundEvent):
        if event["round"] <= self.last_round:
            return
        self.last_round = event["round"]
        await self.send_json(event)

    async def status(self, event: events.StatusEvent, recheck: bool = True):
        # A status change is where access may change (e.g. sharing revoked, experiment deleted),
        # so the cached decision from connect is re-checked here; rounds and logs use the cache.
        if recheck and not await self._allowed():
            await self.close(code=FORBIDDEN)
            return
        key = (event["status"], event["current_round"])
        if key == self.last_status:
            return
        self.last_status = key
        await self.send_json(event)

    async def log(self, event: events.LogEvent):
        await self.send_json(event)

    # -- database ------------------------------------------------------------------------------

    @database_sync_to_async
    def _allowed(self) -> bool:
        experiment = Experiment.objects.filter(pk=self.experiment_id).first()
        if experiment is None:
            return False
        return experiment.can_view(self.scope.get("user")) or experiment.shares_with(self.share_token)

    @database_sync_to_async
    def _history(self) -> tuple[list[dict], events.StatusEvent]:
        experiment = Experiment.objects.get(pk=self.experiment_id)
        rows = RoundMetric.objects.filter(experiment_id=self.experiment_id, round__gt=self.last_round).order_by("round")
        return [row.to_result_dict() for row in rows], events.status_event(experiment)


class WorkersConsumer(AsyncJsonWebsocketConsumer):
    """``/ws/workers/``: the current workers, then their heartbeats, for signed-in users."""

    async def connect(self):
        await self.accept()
        user = self.scope.get("user")
        if not (user and user.is_authenticated):
            await self.close(code=FORBIDDEN)
            return
        self.group = events.WORKERS_GROUP
        await self.channel_layer.group_add(self.group, self.channel_name)
        for payload in await self._current():
            await self.send_json(payload)

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # read-only, like the experiment socket

    async def worker(self, event: events.WorkerEvent):
        await self.send_json(event)

    @database_sync_to_async
    def _current(self) -> list[events.WorkerEvent]:
        return [events.worker_event(w) for w in Worker.objects.all()]


def _query(scope, name: str, default: str = "") -> str:
    from urllib.parse import parse_qs

    return parse_qs(scope.get("query_string", b"").decode()).get(name, [default])[0]


def _after(scope) -> int:
    return parse_int(_query(scope, "after", "0"), minimum=0) or 0
