"""What the public read-only link may show: everything about the run except where it ran.

Worker host names say which machines a team has and what they are called; a link holder has no
need for them. They reach the page in two ways: the experiment's ``worker`` field (simply not
shown) and free text such as log lines ("Running round 3 on gpu0@box"), which ``redact`` cleans.
"""

from __future__ import annotations

import re
from copy import copy

from orchestrator.fleet.workers import Worker

HIDDEN = "a worker"
# Names the engine and the inline runner use for themselves; they name no machine.
NOT_HOSTS = {"", "inline", "worker"}


def host_names(experiment) -> list[str]:
    """Every worker name that could appear in ``experiment``'s text, longest first."""
    names = set(Worker.objects.values_list("hostname", flat=True)) | {experiment.worker}
    # Celery names a worker "name@machine": the machine alone names the host too.
    names |= {name.split("@", 1)[1] for name in names if "@" in name}
    return sorted(names - NOT_HOSTS, key=len, reverse=True)


def redact(text: str, names: list[str]) -> str:
    """``text`` with each of ``names`` (as a whole word) replaced by "a worker", in one pass so a
    replacement is never itself rewritten."""
    if not text or not names:
        return text
    pattern = "|".join(re.escape(name) for name in names)
    return re.sub(rf"(?<![\w@.-])(?:{pattern})(?![\w@-])", HIDDEN, text)


def redact_events(events: list, names: list[str]) -> list:
    """Copies of LogEntry rows whose messages name no worker host (the rows are not saved)."""
    cleaned = []
    for event in events:
        event = copy(event)
        event.message = redact(event.message, names)
        cleaned.append(event)
    return cleaned
