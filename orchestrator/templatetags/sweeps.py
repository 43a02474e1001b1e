"""Filters of the sweep, compare and list pages: a row's metric, mean ± std and a ratio as text, and
headings whose Greek letters keep their case."""

from __future__ import annotations

import unicodedata

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

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


@register.filter
def heading(label: str):
    """``label`` for a table heading: the tables' uppercase style would turn ε into Ε, read as an E
    ("FINAL Ε"), so each Greek letter is wrapped in a span that keeps its case ("FINAL ε")."""
    return mark_safe("".join(_keep_greek(c) for c in str(label)))


def _keep_greek(c: str) -> str:
    return f'<span class="keep-case">{escape(c)}</span>' if "GREEK" in unicodedata.name(c, "") else escape(c)
