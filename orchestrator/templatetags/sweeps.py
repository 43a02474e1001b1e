"""Filters of the sweep and compare pages: a row's metric, mean ± std and a ratio as text."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def metric(row: dict, key: str):
    """``row[key]``: a (mean, std) pair of a configuration row."""
    return row.get(key, (None, None))


@register.filter
def mean_std(pair, metric=None) -> str:
    """``0.8123 ± 0.0150``, in ``metric``'s scale, decimals and unit (a ``summaries.Metric``);
    an en dash when no run has a value yet."""
    mean, std = pair
    if mean is None:
        return "–"
    scale, digits, unit = (metric.scale, metric.digits, metric.unit) if metric else (1.0, 4, "")
    return f"{mean / scale:.{digits}f} ± {std / scale:.{digits}f}{unit}"


@register.filter
def percent(ratio) -> str:
    """``31.5%`` of a ratio; an en dash for none."""
    return "–" if ratio is None or ratio == "" else f"{100 * ratio:.1f}%"
