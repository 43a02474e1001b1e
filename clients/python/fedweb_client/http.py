"""The few HTTP calls the client makes, with urllib."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class ServerAway(Exception):
    """Worth retrying: no connection, a timeout, a 5xx or a 429. ``retry_after`` is the server's hint."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class Refused(Exception):
    """Not worth retrying: the server said the request itself is wrong (a 4xx other than 429).
    ``status`` is its HTTP status, ``body`` its JSON answer (None when it sent none)."""

    def __init__(self, message: str, status: int = 0, body=None):
        super().__init__(message)
        self.status, self.body = status, body


def post(url: str, auth: str, body: dict | None, timeout: float) -> dict:
    """POST JSON; the answer's JSON, or ``ServerAway`` / ``Refused``."""
    data = json.dumps(body or {}, allow_nan=False).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "Authorization": auth}
    )
    return _send(request, timeout)


def get(url: str, auth: str, timeout: float) -> dict:
    """GET; the answer's JSON, or ``ServerAway`` / ``Refused``."""
    request = urllib.request.Request(url, method="GET", headers={"Accept": "application/json", "Authorization": auth})
    return _send(request, timeout)


def _send(request: urllib.request.Request, timeout: float) -> dict:
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        text = e.read()[:2000].decode("utf-8", "replace")
        if e.code == 429 or e.code >= 500:
            retry = e.headers.get("Retry-After")
            raise ServerAway(f"HTTP {e.code}: {text}", float(retry) if retry and retry.isdigit() else None) from None
        raise Refused(f"HTTP {e.code}: {text}", e.code, _json(text)) from None
    except (OSError, ValueError) as e:  # URLError, timeouts, resets, a garbled answer
        raise ServerAway(str(e)) from None


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return None


def create_run(url: str, token: str, fields: dict, timeout: float) -> dict:
    return post(f"{url.rstrip('/')}/api/external/runs/", f"Token {token}", fields, timeout)


def send_rounds(url: str, run_id: int, run_token: str, rounds: list[dict], timeout: float) -> dict:
    return post(
        f"{url.rstrip('/')}/api/external/runs/{run_id}/rounds/", f"Bearer {run_token}", {"rounds": rounds}, timeout
    )


def end_run(url: str, run_id: int, run_token: str, outcome: str, error: str, timeout: float) -> dict:
    body = {"error": error} if outcome == "fail" else {}
    return post(f"{url.rstrip('/')}/api/external/runs/{run_id}/{outcome}/", f"Bearer {run_token}", body, timeout)
