"""Where round work writes its log lines, so that neither the engine nor the engine-handling code
imports Channels: they call ``log_line(level, message)``, and the callback made here turns it into
a LogEntry row plus a live ``log`` event (or a line on stdout for the headless command).

("report" in FedWeb means the offline HTML report, ``orchestrator/web/report.py``, and nothing else.)"""

from __future__ import annotations

from collections.abc import Callable

LogLine = Callable[[str, str], None]


def to_experiment_log(experiment) -> LogLine:
    """Log lines go to ``experiment``'s log: stored, and sent to its open pages."""

    def log_line(level: str, message: str) -> None:
        experiment.log(level, message)

    return log_line


def to_stdout(prefix: str = "") -> LogLine:
    """For the headless ``run_experiment --inline`` command."""

    def log_line(level: str, message: str) -> None:
        print(f"{prefix}[{level}] {message}", flush=True)

    return log_line
