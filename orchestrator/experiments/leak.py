"""The memory-leak heuristic of the dashboard, its report and its live badge (the only copy: each
round event carries its verdict, ``orchestrator.live.events.round_event``).

A series (host RSS or VRAM peak, MB per round) "leaks" when, after the warm-up rounds, at least
``MIN_POINTS`` rounds show a least-squares slope above ``MIN_SLOPE_MB`` per round AND the fitted
growth over those rounds exceeds ``MIN_GROWTH`` of the starting level. Both conditions, so that a
flat series with noise (slope but no growth) and a big model with a few MB of drift (growth far
below 5%) stay quiet. The first rounds are skipped because allocators and caches legitimately
fill up there.
"""

from __future__ import annotations

from orchestrator.experiments.records import RoundMetric

_SERIES = (("rss_mb", "Host RSS"), ("vram_peak_mb", "VRAM peak"))  # per-round MB, and the warning's name
WARMUP_ROUNDS = 3
MIN_POINTS = 10
WINDOW = 30
MIN_SLOPE_MB = 1.0
MIN_GROWTH = 0.05


def leak_check(values: list[float | None], *, warmup: int = WARMUP_ROUNDS) -> dict:
    """``{"leak": bool, "slope_mb": float|None, "growth": float|None}`` for a per-round series
    (``warmup=0`` when the warm-up rounds are already left out)."""
    ys = [v for v in values[warmup:] if v is not None][-WINDOW:]
    if len(ys) < MIN_POINTS:
        return {"leak": False, "slope_mb": None, "growth": None}
    n = len(ys)
    mean_x = (n - 1) / 2
    mean_y = sum(ys) / n
    sxx = sum((i - mean_x) ** 2 for i in range(n))
    slope = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(ys)) / sxx
    start = mean_y - slope * mean_x  # fitted value at the window's first round
    growth = slope * (n - 1) / start if start > 0 else 0.0
    return {"leak": slope > MIN_SLOPE_MB and growth > MIN_GROWTH, "slope_mb": slope, "growth": growth}


def leak_warnings(rounds: list[dict], *, warmup: int = WARMUP_ROUNDS) -> list[str]:
    """Readable warnings for the memory series of a run's rounds (``RoundResult`` dicts)."""
    out = []
    for key, label in _SERIES:
        check = leak_check([r.get(key) for r in rounds], warmup=warmup)
        if check["leak"]:
            out.append(
                f"{label} grows {check['slope_mb']:.1f} MB per round "
                f"({check['growth'] * 100:.0f}% over the last rounds): possible memory leak"
            )
    return out


def reads_memory(rounds: list[dict]) -> bool:
    """Whether any of ``rounds`` has a number the heuristic reads (an external run may report none)."""
    return any(r.get(key) is not None for r in rounds for key, _ in _SERIES)


def latest_leak_warnings(experiment_id: int) -> list[str]:
    """``leak_warnings`` of a run as its rounds in the database stand, reading only the rounds the
    heuristic looks at (after the warm-up, the last ones), so each round event pays one small query."""
    # Twice the window: a series with a few missing values still gets WINDOW points.
    rows = RoundMetric.objects.filter(experiment_id=experiment_id, round__gt=WARMUP_ROUNDS).order_by("-round")
    recent = list(rows.values("rss_mb", "vram_peak_mb")[: 2 * WINDOW])[::-1]
    return leak_warnings(recent, warmup=0)
