"""One subscription per web process and experiment: live events fanned out to its sockets locally.

With each socket in the experiment's channel group, a round watched by 200 viewers cost 200
channel-layer messages (Redis writes and reads), 200 JSON encodings and, on the public link, 200
database reads to redact each log line: per-socket work that serialises in one process and put
p99 at seconds (``python -m benchmarks viewers``). Here one channel per process and event loop
joins the group; each event arrives once, its JSON and its public (redacted) variant are made
once, and every local socket gets it in the order it came.

Rounds that come faster than a page draws are coalesced: the first waits at most
``COALESCE_SECONDS`` for the ones right behind it, and a socket gets them as one ``rounds``
message (``{"type": "rounds", "rounds": [round events]}``), so a browser handles one message per
frame, not twenty. A single round still goes out as a plain ``round`` event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Protocol

from channels.db import database_sync_to_async

from orchestrator.experiments.public import host_names, redact
from orchestrator.models import Experiment

log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.1  # a bounded delay (6 frames at 60 Hz), well under the 250 ms goal


class Subscriber(Protocol):
    share_token: str

    async def deliver(self, event: dict, prepared: Prepared) -> None: ...


class Prepared:
    """What an event needs once per process, not per socket: its JSON, and for the public link
    the same event with worker hosts redacted (one database read)."""

    def __init__(self, event: dict) -> None:
        self.event = event
        self._text: str | None = None
        self._public: dict | None = None
        self._public_text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = json.dumps(self.event)
        return self._text

    async def public(self) -> dict:
        if self._public is None:
            self._public = await _public_variant(self.event)
        return self._public

    async def text_for(self, public: bool) -> str:
        """The JSON a socket sends: the event's, or (a public link's socket) its public variant's."""
        if not public:
            return self.text
        if self._public_text is None:
            self._public_text = json.dumps(await self.public())
        return self._public_text


async def _public_variant(event: dict) -> dict:
    if event["type"] == "round":  # rounds need no database read: only their worker is blanked
        return _without_worker(event)
    if event["type"] == "rounds":
        return {**event, "rounds": [_without_worker(r) for r in event["rounds"]]}
    return await _redacted(event)


@database_sync_to_async
def _redacted(event: dict) -> dict:
    experiment = Experiment.objects.filter(pk=event.get("experiment_id")).first()
    hosts = host_names(experiment) if experiment else []
    if event["type"] == "status":
        return {**event, "worker": "", "error": redact(event["error"], hosts)}
    if event["type"] == "log":
        return {**event, "message": redact(event["message"], hosts)}
    return event


def _without_worker(event: dict) -> dict:
    """A round event whose metrics name no worker host (the rounds table's Worker column)."""
    return {**event, "metrics": {**event["metrics"], "worker": ""}} if "metrics" in event else event


class Fanout:
    """One group's subscription in one event loop (a daphne process; a test's loop): its own
    channel in the group, and the local sockets that watch it."""

    def __init__(self, layer, group: str) -> None:
        self.layer, self.group = layer, group
        self.channel: str | None = None
        self.subscribers: list[Subscriber] = []
        self.task: asyncio.Task | None = None
        self.rounds: list[dict] = []  # round events waiting to go out together
        # One dispatch at a time, in arrival order (asyncio's lock is FIFO): a batch flushed by the
        # timer must not overtake the one before it, or a socket would skip rounds as already seen.
        self.sending = asyncio.Lock()
        self.joining = asyncio.Lock()  # sockets connecting at once make one channel, not several

    async def subscribe(self, subscriber: Subscriber) -> None:
        async with self.joining:
            if self.channel is None:
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(self.group, self.channel)
                self.task = asyncio.create_task(self._receive_loop(self.channel))
            self.subscribers.append(subscriber)

    async def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)
        if not self.subscribers and self.channel is not None:
            channel, task = self.channel, self.task
            self.channel, self.task = None, None
            _fanouts.get(asyncio.get_running_loop(), {}).pop((id(self.layer), self.group), None)
            await self.layer.group_discard(self.group, channel)
            if task is not None:
                task.cancel()  # nobody watches here any more: no loop left behind

    async def _receive_loop(self, channel: str) -> None:
        while True:
            message = await self.layer.receive(channel)
            if message.get("type") == "round":
                self.rounds.append(message)
                if len(self.rounds) == 1:  # the first of a burst waits a moment for the others
                    asyncio.get_running_loop().call_later(COALESCE_SECONDS, lambda: asyncio.ensure_future(self.flush()))
            else:
                await self.flush()  # rounds before a status or log stay before it
                await self._dispatch(message)

    async def flush(self) -> None:
        rounds, self.rounds = self.rounds, []
        if len(rounds) == 1:
            await self._dispatch(rounds[0])
        elif rounds:
            await self._dispatch({"type": "rounds", "experiment_id": rounds[0]["experiment_id"], "rounds": rounds})

    async def _dispatch(self, event: dict) -> None:
        prepared = Prepared(event)
        async with self.sending:
            for subscriber in list(self.subscribers):
                try:
                    await subscriber.deliver(event, prepared)
                except Exception:  # one broken socket must not stop the others' events
                    log.warning("could not deliver a %s event", event.get("type"), exc_info=True)


_fanouts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str], Fanout]] = (
    weakref.WeakKeyDictionary()
)


def fanout_for(layer, group: str) -> Fanout:
    """This event loop's fan-out of ``group`` on ``layer``."""
    per_loop = _fanouts.setdefault(asyncio.get_running_loop(), {})
    key = (id(layer), group)
    if key not in per_loop:
        per_loop[key] = Fanout(layer, group)
    return per_loop[key]
