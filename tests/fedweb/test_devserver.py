"""`make run` (scripts/devserver.py) prints its URL only once /healthz answers (issue 21)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request
from queue import Empty, Queue

import pytest

from fedweb.localredis import free_port
from tests.live import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _lines(proc: subprocess.Popen) -> Queue:
    """The process's output lines, read by a thread (so the test can wait on them with a bound)."""
    lines: Queue = Queue()

    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _url_line(lines: Queue, seen: list[str], timeout: float) -> str:
    while True:
        try:
            line = lines.get(timeout=timeout)
        except Empty:
            raise TimeoutError(f"no URL line within {timeout:.0f} s; output so far: {''.join(seen)[-2000:]}") from None
        if line is None:
            raise AssertionError(f"the devserver exited without a URL line: {''.join(seen)[-2000:]}")
        seen.append(line)
        if "FedWeb is running at" in line:
            return line


def test_the_url_is_printed_only_once_healthz_answers(tmp_path):
    port = free_port()
    env = {**os.environ, "FEDWEB_DATA_DIR": str(tmp_path), "PORT": str(port), "HOST": "127.0.0.1"}
    env.pop("DATABASE_URL", None)  # SQLite in the temporary data folder
    proc = subprocess.Popen(
        [sys.executable, "scripts/devserver.py", "--no-demo"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen: list[str] = []
    try:
        line = _url_line(_lines(proc), seen, timeout=180)
        # At the moment the line appears the server must already answer: no retry here.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            status = response.status
        assert status == 200 and f"http://127.0.0.1:{port}/" in line
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
