"""Fault injection for the crash tests: kill this worker at a precise point of a round.

``FEDWEB_CRASH_AT=after-record:5`` makes the worker that records round 5 kill its whole process
group (the Celery main process and its pool child, as ``kill -9`` of the machine would) right
after the round is recorded and before the next one is sent. Unset in any real deployment.
"""

from __future__ import annotations

import os
import signal


def crash_point(name: str, round_number: int) -> None:
    if os.environ.get("FEDWEB_CRASH_AT") == f"{name}:{round_number}":
        os.killpg(os.getpgrp(), signal.SIGKILL)
