"""Callbacks through which round work reports progress, so that neither the engine nor the
engine-handling code imports Channels: they call ``report(level, message)`` and this module
turns it into an Event row plus a live ``log`` event."""

from __future__ import annotations

from collections.abc import Callable

Report = Callable[[str, str], None]


def for_experiment(experiment) -> Report:
    def report(level: str, message: str) -> None:
        experiment.log(level, message)

    return report


def to_stdout(prefix: str = "") -> Report:
    """For the headless ``run_experiment --inline`` command."""

    def report(level: str, message: str) -> None:
        print(f"{prefix}[{level}] {message}", flush=True)

    return report
