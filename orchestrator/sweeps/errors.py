"""The one error of a sweep's submission, raised by its expansion and its search settings alike."""

from __future__ import annotations


class SweepError(ValueError):
    """An invalid sweep: ``errors`` maps a field (``axes``, ``mode``, ``spec.algorithm.mu``...) to messages."""

    def __init__(self, errors: dict[str, list[str]]):
        super().__init__("; ".join(m for msgs in errors.values() for m in msgs))
        self.errors = errors
