"""A run being logged: ``init`` makes one, ``Run.log`` queues a round, ``Run.finish`` ends it.

The training loop only ever touches ``log`` (a ``put_nowait`` on a bounded queue). One background
thread owns everything else: creating the run on the server, sending rounds in batches, retrying
with exponential backoff (honouring Retry-After), and spilling to the JSONL journal (see
``fedweb_client.journal``) when offline, when the server stays away longer than ``give_up_after``
seconds, or when ``finish`` runs out of time. Errors are kept in ``Run.errors``, never raised.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from pathlib import Path

from fedweb_client import http
from fedweb_client.journal import Journal

log = logging.getLogger("fedweb_client")
_END = object()


class Run:
    def __init__(
        self, url: str, token: str, fields: dict, *, offline: bool = False, journal: str | Path | None = None,
        batch_size: int = 200, flush_interval: float = 0.25, max_queue: int = 100_000, timeout: float = 5.0,
        give_up_after: float = 300.0, max_backoff: float = 10.0,
    ):  # fmt: skip
        self.url, self._token, self.fields = url, token, fields
        self.offline, self.batch_size, self.flush_interval = offline, batch_size, flush_interval
        self.timeout, self.give_up_after, self.max_backoff = timeout, give_up_after, max_backoff
        self.id: int | None = None
        self.run_token: str | None = None
        self.dashboard: str | None = None
        self.errors: list[str] = []
        self.sent = 0  # rounds the server has acknowledged
        name = "".join(c if c.isalnum() else "_" for c in fields.get("name", "run"))[:40]
        self.journal = Journal(Path(journal) if journal else Path(f"fedweb-{name}-{int(time.time())}.jsonl"))
        self._queue: queue.Queue = queue.Queue(maxsize=max_queue)
        self._pending: list[dict] = []
        self._spilled = offline  # once spilled, every later round goes to the journal too (keeps order)
        self._outcome: tuple[str, str] | None = None
        self._finished = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fedweb-client", daemon=True)
        self._thread.start()

    # -- the training loop's side ------------------------------------------------------------------

    def log(self, round: int, metrics: dict) -> None:
        """Queue round ``round``'s scalars; returns at once and never raises."""
        try:
            self._queue.put_nowait((round, dict(metrics)))
        except queue.Full:  # the thread is far behind: the journal keeps the round (a file write, no network)
            self._note("queue full: a round went to the journal")
            self._spill_now([{"round": round, "metrics": _clean(dict(metrics), self)}])
        except Exception as e:  # e.g. metrics that are not a mapping
            self._note(f"log({round!r}) ignored: {e}")

    def finish(self, timeout: float = 30.0) -> bool:
        """End the run; waits up to ``timeout`` s for the rounds to be sent. True when the server has
        them all; else they are in ``self.journal.path`` for ``python -m fedweb_client sync``."""
        return self._end("finish", "", timeout)

    def fail(self, error: str = "", timeout: float = 30.0) -> bool:
        """End the run as failed (e.g. from an ``except`` around the training loop)."""
        return self._end("fail", error, timeout)

    def _end(self, outcome: str, error: str, timeout: float) -> bool:
        if self._outcome is None:
            self._outcome = (outcome, error)
            try:
                self._queue.put(_END, timeout=timeout)
            except queue.Full:
                self._note("finish: the queue stayed full")
        self._finished.wait(timeout)
        if not self._finished.is_set():
            self._spilled = True  # the thread writes what is left to the journal as soon as it can
            self._note(
                f"finish: not all rounds sent in {timeout} s; run `python -m fedweb_client sync {self.journal.path}`"
            )
            return False
        return not self._spilled

    # -- the thread ---------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._send_until_end()
        except Exception as e:  # e.g. the journal's disk is full: noted, never raised into the program
            self._note(f"the sending thread stopped: {type(e).__name__}: {e}")
        finally:
            self._finished.set()

    def _send_until_end(self) -> None:
        backoff, away_since, ending = 0.0, None, False
        while True:
            ending = self._drain(wait=0 if (backoff or ending) else self.flush_interval) or ending
            if self._spilled:
                self._spill_now(self._take(len(self._pending)))
                if ending:
                    self.journal.end(*self._outcome)
                    break
                continue
            try:
                if self.id is None:
                    self._create()
                while self._pending:
                    batch = self._pending[: self.batch_size]
                    http.send_rounds(self.url, self.id, self.run_token, batch, self.timeout)
                    del self._pending[: len(batch)]
                    self.sent += len(batch)
                if ending:
                    http.end_run(self.url, self.id, self.run_token, *self._outcome, self.timeout)
                    break
                backoff, away_since = 0.0, None
            except http.ServerAway as e:
                away_since = away_since or time.monotonic()
                if time.monotonic() - away_since > self.give_up_after:
                    self._note(f"server away for {self.give_up_after} s ({e}): spilling to {self.journal.path}")
                    self._spilled = True
                    continue
                backoff = min(self.max_backoff, max(0.2, backoff * 2), e.retry_after or self.max_backoff)
                self._sleep(backoff)
            except http.Refused as e:
                self._note(f"refused: {e}")
                if self.id is None:  # cannot create the run: keep everything for a later sync
                    self._spilled = True
                else:
                    del self._pending[: self.batch_size]  # the server will never take this batch
                    if ending:
                        break

    def _create(self) -> None:
        answer = http.create_run(self.url, self._token, self.fields, self.timeout)
        self.id, self.run_token, self.dashboard = answer["id"], answer["token"], answer.get("dashboard")
        self.journal.created(self.id, self.run_token)

    def _drain(self, wait: float) -> bool:
        """Move queued rounds to ``_pending``; True when ``finish`` was called."""
        try:
            item = self._queue.get(timeout=wait) if wait else self._queue.get_nowait()
        except queue.Empty:
            return False
        while True:
            if item is _END:
                return True
            round_number, metrics = item
            self._pending.append({"round": round_number, "metrics": _clean(metrics, self)})
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return False

    def _take(self, n: int) -> list[dict]:
        taken, self._pending = self._pending[:n], self._pending[n:]
        return taken

    def _spill_now(self, rounds: list[dict]) -> None:
        self.journal.start(self.url, self.fields, self.id, self.run_token)
        self.journal.rounds(rounds)

    def _sleep(self, seconds: float) -> None:
        # Wakes early for finish, so the last retries don't wait out a long backoff.
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self._outcome is None:
            time.sleep(min(0.05, seconds))

    def _note(self, message: str) -> None:
        self.errors.append(message)
        log.warning("fedweb_client: %s", message)


def _clean(metrics: dict, run: Run) -> dict:
    """Finite numbers only (the server refuses a whole batch for one NaN): others are dropped."""
    out = {}
    for name, value in metrics.items():
        value = value.item() if hasattr(value, "item") else value  # numpy / torch scalars
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            run._note(f"metric {name!r} = {value!r} dropped: not a finite number")
            continue
        out[str(name)] = value
    return out


def init(
    url: str, token: str, name: str, config: dict | None = None, team: int | None = None,
    tags: list[str] | None = None, visibility: str | None = None, total_rounds: int | None = None, **options,
) -> Run:  # fmt: skip
    """Start logging a run to the FedWeb at ``url`` with a user's API ``token``; never raises for a
    server that is away (the run is created when it comes back, or later by ``sync``).
    ``options``: offline, journal (the JSONL path), batch_size, flush_interval, timeout, give_up_after."""
    fields: dict = {"name": name, "config": config or {}}
    for key, value in (("team", team), ("tags", tags), ("visibility", visibility), ("total_rounds", total_rounds)):
        if value is not None:
            fields[key] = value
    return Run(url, token, fields, **options)
