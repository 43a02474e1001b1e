"""The sweep page's socket: ``/ws/sweeps/<id>/`` tells the page that one of the sweep's runs changed
(a round recorded, a status changed), and the page fetches the sweep's progress, table and charts
again from the database (``views.sweep_sharing.sweep_live``), so the page itself never reloads.

It joins the groups of the sweep's runs, so the events the round tasks already publish for each run
(``orchestrator.live.events``) reach it, and so do their ``access`` events (a sweep's sharing is
applied to its runs, which publishes them); and the sweep's own group, where its search announces
its decisions (``search``: the socket then joins the groups of the runs a TPE search created since). Access is checked as on the
experiment socket: at connect, and again on every event; a socket that lost access is closed with
4403 and sends nothing more.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from orchestrator.experiments import access
from orchestrator.live import events
from orchestrator.live.consumers import FORBIDDEN, _GroupsMixin
from orchestrator.models import Sweep


class SweepChanged(TypedDict):
    """What the page receives: which run changed and how (it then asks for the sweep again)."""

    type: Literal["sweep_changed"]
    sweep_id: int
    experiment_id: int | None  # None on connect: "fetch what you have missed"
    change: Literal["connected", "round", "status", "search"]


class SweepConsumer(_GroupsMixin, AsyncJsonWebsocketConsumer):
    """Signed-in users who may view the sweep (a sweep has no public link)."""

    async def dispatch(self, message):
        # A run's group may carry event types this page has no use for, or types added later (e.g.
        # coalesced rounds): any event of a run is a change to refetch, never an error.
        if message["type"].startswith("websocket.") or getattr(self, get_handler_name(message), None):
            return await super().dispatch(message)
        if self.allowed and "experiment_id" in message and await self._still_allowed():
            await self.send_json(self._changed(message["experiment_id"], "round"))

    async def connect(self):
        self.sweep_id = int(self.scope["url_route"]["kwargs"]["sweep_id"])
        self.joined: list[str] = []
        self.allowed = False
        await self.accept()  # accept first so the close code reaches the client
        run_ids = await self._allowed_runs()
        if run_ids is None:
            await self.forbid()
            return
        self.allowed = True
        runs = (events.group_name(pk) for pk in run_ids)
        await self.join(events.sweep_group_name(self.sweep_id), *runs, *self.user_groups())
        await self.send_json(self._changed(None, "connected"))

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # read-only: controls go through views

    # -- handlers named by the events of the runs' groups (orchestrator.live.events) ------------------

    async def access(self, event: events.AccessEvent):
        if self.allowed:
            await self._still_allowed()

    async def round(self, event: events.RoundEvent):
        if self.allowed and await self._still_allowed():
            await self.send_json(self._changed(event["experiment_id"], "round"))

    async def status(self, event: events.StatusEvent):
        if self.allowed and await self._still_allowed():
            await self.send_json(self._changed(event["experiment_id"], "status"))

    async def log(self, event: events.LogEvent):
        pass  # the sweep page shows no run's log

    async def search(self, event: events.SearchEvent):
        """The search decided: runs it created since the connect are joined, and the page refetches."""
        if not self.allowed:
            return
        run_ids = await self._allowed_runs()
        if run_ids is None:
            await self.forbid()
            return
        await self.join(*(g for g in (events.group_name(pk) for pk in run_ids) if g not in self.joined))
        await self.send_json(self._changed(None, "search"))

    # -- groups and access --------------------------------------------------------------------------

    async def forbid(self) -> None:
        self.allowed = False
        await self.close(code=FORBIDDEN)

    def user_groups(self) -> list[str]:
        user = self.scope.get("user")
        return [events.user_group_name(user.pk)] if user and user.is_authenticated else []

    def _changed(self, experiment_id: int | None, change: str) -> SweepChanged:
        return {"type": "sweep_changed", "sweep_id": self.sweep_id, "experiment_id": experiment_id, "change": change}

    async def _still_allowed(self) -> bool:
        if await self._allowed_runs() is not None:
            return True
        await self.forbid()
        return False

    @database_sync_to_async
    def _allowed_runs(self) -> list[int] | None:
        """The sweep's run ids if the socket's user may view the sweep now, else None."""
        sweep = Sweep.objects.filter(pk=self.sweep_id).first()
        if sweep is None or not access.can_view(sweep, _fresh_user(self.scope)):
            return None
        return list(sweep.experiments.values_list("pk", flat=True))


def _fresh_user(scope):
    """The socket's user as the database has it now (None if signed out, deactivated or deleted)."""
    user = scope.get("user")
    if not (user and user.is_authenticated):
        return None
    return get_user_model().objects.filter(pk=user.pk, is_active=True).first()
