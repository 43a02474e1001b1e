"""One subscription per web process and experiment: live events fanned out to its sockets locally.

With each socket in the experiment's channel group, a round watched by 200 viewers cost 200
channel-layer messages (Redis writes and reads), 200 JSON encodings and, on the public link, 200
database reads to redact each log line: per-socket work that serialises in one process and put
p99 at seconds (``python -m benchmarks viewers``). Here one channel per process and event loop
joins the group; each event arrives once, its JSON and its public (redacted) variant are made
once, and every local socket gets it in the order it came.

Events go out at once, but no sooner than ``COALESCE_SECONDS`` after the previous message began
going out, and never while it is still going out: rounds that come faster than that (or while a
slow dispatch runs) wait for that moment and go out together, as one ``rounds`` message
(``{"type": "rounds", "rounds": [round events]}``). So a lone round waits for nothing, a browser
handles at most 1 / ``COALESCE_SECONDS`` messages a second, and an overloaded process sends fewer,
larger messages instead of falling behind. A single round still goes out as a plain ``round`` event.
(A fixed wait of 100 ms for the rounds behind the first added 50-100 ms to every round at 20
rounds/s: ``python -m benchmarks viewers``.)

Nothing is lost for good on this path: a failed channel-layer read is logged and reading goes on, and
the sockets get a local ``resync`` event, on which each sends what the database has beyond its last
round (and the current status), as a socket does on connect.

The safety-net access check (``consumers.ACCESS_RECHECK_SECONDS``) is shared here too: sockets of
the same user and link ask :meth:`Fanout.check_access`, which reads the database once per key and
interval, not once per socket; an ``access`` event clears the shared verdicts first.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

from channels.db import database_sync_to_async

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.public import host_names, redact

log = logging.getLogger(__name__)
COALESCE_SECONDS = 0.05  # at most 20 messages a second to a page (3 frames at 60 Hz); a bounded delay
READ_RETRY_SECONDS = 0.5  # after a failed channel-layer read, before the next
RESYNC = "resync"  # a local event: events may have been lost here; the sockets read the database


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
        self.tasks: list[asyncio.Task] = []
        # Events received and not yet sent, in arrival order. One sender task sends them, so a batch
        # never overtakes the one before it (a socket would skip rounds as already seen).
        self.pending: list[dict] = []
        self.wake = asyncio.Event()
        self.last_sent = float("-inf")  # loop time when the previous message began going out
        self.joining = asyncio.Lock()  # sockets connecting at once make one channel, not several
        self.verdicts: dict[Hashable, tuple[float, asyncio.Future]] = {}

    async def subscribe(self, subscriber: Subscriber) -> None:
        async with self.joining:
            if self.channel is None:
                self.channel = await self.layer.new_channel()
                await self.layer.group_add(self.group, self.channel)
                self.tasks = [
                    asyncio.create_task(self._receive_loop(self.channel)),
                    asyncio.create_task(self._send_loop()),
                ]
            self.subscribers.append(subscriber)

    async def unsubscribe(self, subscriber: Subscriber) -> None:
        if subscriber in self.subscribers:
            self.subscribers.remove(subscriber)
        if not self.subscribers and self.channel is not None:
            channel, tasks = self.channel, self.tasks
            self.channel, self.tasks = None, []
            _fanouts.get(asyncio.get_running_loop(), {}).pop((id(self.layer), self.group), None)
            await self.layer.group_discard(self.group, channel)
            for task in tasks:
                task.cancel()  # nobody watches here any more: no loop left behind

    async def check_access(self, key: Hashable, check: Callable[[], Awaitable[bool]], max_age: float) -> bool:
        """``check()``'s verdict for ``key`` (a user and link), read at most ``max_age`` seconds ago
        by any local socket with that key; sockets asking at once share one read."""
        now = time.monotonic()
        entry = self.verdicts.get(key)
        if entry is None or now - entry[0] > max_age or _failed(entry[1]):
            entry = (now, asyncio.ensure_future(check()))
            self.verdicts[key] = entry
        return await asyncio.shield(entry[1])

    async def _receive_loop(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A failed read (Redis slow or away) must not end this process's events for good
                # while its sockets stay open; channels_redis also drops what it had buffered for the
                # channel. So the sockets are told to catch up from the database, and reading goes on.
                log.warning("live events of %s: a channel-layer read failed; catching up", self.group, exc_info=True)
                await asyncio.sleep(READ_RETRY_SECONDS)
                message = {"type": RESYNC}
            self.pending.append(message)  # the list as it is now: the sender swaps it for a new one
            self.wake.set()

    async def _send_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self.wake.wait()
            delay = self.last_sent + COALESCE_SECONDS - loop.time()
            if delay > 0:  # the previous message went out just now: let the rounds behind it gather
                await asyncio.sleep(delay)
            self.wake.clear()
            pending, self.pending = self.pending, []
            self.last_sent = loop.time()
            for event in _batched(pending):
                await self._dispatch(event)

    async def _dispatch(self, event: dict) -> None:
        if event.get("type") == "access":
            self.verdicts.clear()  # who may read it may have changed: read again, once per key
        prepared = Prepared(event)
        for subscriber in list(self.subscribers):
            try:
                await subscriber.deliver(event, prepared)
            except Exception:  # one broken socket must not stop the others' events
                log.warning("could not deliver a %s event", event.get("type"), exc_info=True)


def _failed(future: asyncio.Future) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


def _batched(events: list[dict]) -> list[dict]:
    """``events`` in order, each run of consecutive rounds as one ``rounds`` event (a lone round as itself)."""
    out: list[dict] = []
    rounds: list[dict] = []

    def close_run() -> None:
        if len(rounds) == 1:
            out.append(rounds[0])
        elif rounds:
            out.append({"type": "rounds", "experiment_id": rounds[0]["experiment_id"], "rounds": list(rounds)})
        rounds.clear()

    for event in events:
        if event.get("type") == "round":
            rounds.append(event)
        else:
            close_run()
            out.append(event)
    close_run()
    return out


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
