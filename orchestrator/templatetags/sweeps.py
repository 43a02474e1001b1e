"""Filters of the sweep and compare pages: a row's metric, and mean ± std as text."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def metric(row: dict, key: str):
    """``row[key]``: a (mean, std) pair of a configuration row."""
    return row.get(key, (None, None))


@register.filter
def mean_std(pair) -> str:
    """``0.8123 ± 0.0150``; an en dash when no run has a value yet."""
    mean, std = pair
    return "–" if mean is None else f"{mean:.4f} ± {std:.4f}"
