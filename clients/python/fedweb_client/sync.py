"""Upload a run's JSONL journal (``python -m fedweb_client sync FILE``).

Safe to run again: the server keeps each round once (a resend of the same values is no duplicate),
and the run made by the first sync is written back to the file so a second one doesn't make another.
"""

from __future__ import annotations

import json
from pathlib import Path

from fedweb_client import http
from fedweb_client.journal import Journal

BATCH = 500


def sync(path: str | Path, *, token: str | None = None, url: str | None = None, timeout: float = 30.0) -> dict:
    """Send the journal's rounds (and its end) to the server; returns ``{"id", "sent", "duplicates"}``.
    ``token`` (a user's API token) is needed only when the run was never created on the server."""
    path = Path(path)
    init, run_id, run_token, rounds, end = None, None, None, {}, None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            raise ValueError(f"{path}:{number}: not a JSON line") from None
        kind = entry.get("type")
        if kind == "init":
            init = entry
        elif kind == "created":
            run_id, run_token = entry["id"], entry["token"]
        elif kind == "round":
            rounds[entry["round"]] = entry["metrics"]  # a round written twice: its last copy
        elif kind == "end":
            end = entry
    if init is None:
        raise ValueError(f"{path}: no init line: not a fedweb_client journal")
    url = url or init["url"]
    if run_id is None:
        if not token:
            raise ValueError("The run was never created on the server: pass --token (a user API token)")
        answer = http.create_run(url, token, init["fields"], timeout)
        run_id, run_token = answer["id"], answer["token"]
        Journal(path)._write([{"type": "created", "id": run_id, "token": run_token}])
    ordered = [{"round": n, "metrics": rounds[n]} for n in sorted(rounds)]
    sent = duplicates = 0
    for i in range(0, len(ordered), BATCH):
        answer = http.send_rounds(url, run_id, run_token, ordered[i : i + BATCH], timeout)
        sent += len(answer.get("recorded", []))
        duplicates += len(answer.get("duplicates", []))
    if end is not None:
        try:
            http.end_run(url, run_id, run_token, end["outcome"], end.get("error", ""), timeout)
        except http.Refused as e:
            if "409" not in str(e):  # already ended by an earlier sync: fine
                raise
    return {"id": run_id, "sent": sent, "duplicates": duplicates}
