"""The one fake RoundResult of the web tests, built through the engine's dataclass so a field the
engine adds, drops or renames breaks every test that uses it at once."""

from __future__ import annotations

from fedweb_engine.results.round_result import RoundResult


def round_result(n: int, **overrides) -> dict:
    """A plausible CPU RoundResult for round ``n`` as a dict (no VRAM); ``overrides`` replace fields."""
    values = {
        "round": n, "participants": 4, "completed": 4, "stragglers": 0, "dropped": 0,
        "train_loss": 2.0 / n, "test_loss": 2.1 / n, "test_accuracy": min(0.99, 0.1 * n),
        "bytes_down": 4 * 1000, "bytes_up": 4 * 1000, "bytes_formula": 8 * 4 * 1000,
        "round_seconds": 0.5, "train_seconds": 0.4, "samples": 100, "rss_mb": 500.0, "threads": 4,
        "vram_allocated_mb": None, "vram_reserved_mb": None, "vram_peak_mb": None, "device": "cpu",
    }  # fmt: skip
    return RoundResult(**{**values, **overrides}).to_dict()
