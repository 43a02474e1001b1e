"""The local JSONL file a run falls back to, and that ``sync`` uploads.

Lines: ``{"type": "init", "url", "fields"}`` first, then ``{"type": "created", "id", "token"}`` once
the server made the run, ``{"type": "round", "round", "metrics"}`` per round, and
``{"type": "end", "outcome", "error"}`` last. Holds a run token: keep it as private as the token.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path


class Journal:
    def __init__(self, path: Path):
        self.path = path
        self._started = False
        self._lock = threading.Lock()  # log() may write here too when the queue is full

    def _write(self, lines: list[dict]) -> None:
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.writelines(json.dumps(line) + "\n" for line in lines)

    def start(self, url: str, fields: dict, run_id: int | None, token: str | None) -> None:
        if self._started:
            return
        self._started = True
        lines = [{"type": "init", "url": url, "fields": fields}]
        if run_id is not None:
            lines.append({"type": "created", "id": run_id, "token": token})
        self._write(lines)

    def created(self, run_id: int, token: str) -> None:
        if self._started:
            self._write([{"type": "created", "id": run_id, "token": token}])

    def rounds(self, rounds: list[dict]) -> None:
        if rounds:
            self._write([{"type": "round", **r} for r in rounds])

    def end(self, outcome: str, error: str) -> None:
        self._write([{"type": "end", "outcome": outcome, "error": error}])
