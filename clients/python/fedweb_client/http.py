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
    """Not worth retrying: the server said the request itself is wrong (a 4xx other than 429)."""


def post(url: str, auth: str, body: dict | None, timeout: float) -> dict:
    """POST JSON; the answer's JSON, or ``ServerAway`` / ``Refused``."""
    data = json.dumps(body or {}, allow_nan=False).encode()
    request = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", "Authorization": auth}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as e:
        text = e.read()[:2000].decode("utf-8", "replace")
        if e.code == 429 or e.code >= 500:
            retry = e.headers.get("Retry-After")
            raise ServerAway(f"HTTP {e.code}: {text}", float(retry) if retry and retry.isdigit() else None) from None
        raise Refused(f"HTTP {e.code}: {text}") from None
    except (OSError, ValueError) as e:  # URLError, timeouts, resets, a garbled answer
        raise ServerAway(str(e)) from None


def create_run(url: str, token: str, fields: dict, timeout: float) -> dict:
    return post(f"{url.rstrip('/')}/api/external/runs/", f"Token {token}", fields, timeout)


def send_rounds(url: str, run_id: int, run_token: str, rounds: list[dict], timeout: float) -> dict:
    return post(
        f"{url.rstrip('/')}/api/external/runs/{run_id}/rounds/", f"Bearer {run_token}", {"rounds": rounds}, timeout
    )


def end_run(url: str, run_id: int, run_token: str, outcome: str, error: str, timeout: float) -> dict:
    body = {"error": error} if outcome == "fail" else {}
    return post(f"{url.rstrip('/')}/api/external/runs/{run_id}/{outcome}/", f"Bearer {run_token}", body, timeout)
