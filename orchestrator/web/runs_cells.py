"""How the runs table shows a value: numbers in their column's unit and decimals, a spec value as
the spec has it, dates, and "–" for what a run lacks (a "to target" cell then says the best the run
reached). The CSV download writes the same text."""

from __future__ import annotations

import json
from datetime import datetime
from urllib.parse import quote

from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.timesince import timesince

from orchestrator.runs.query import literal
from orchestrator.runs.table import best_reached, value
from orchestrator.runs.vocabulary import DATE, NUMBER, SPEC, TAGS, Column

DASH = "–"


def number_text(column: Column, raw) -> str:
    if raw is None:
        return DASH
    scaled = raw / column.scale
    if column.digits is None:
        return f"{scaled:g}{column.unit}"
    return f"{scaled:.{column.digits}f}{column.unit}"


def text(column: Column, raw) -> str:
    """The value as the table and the CSV show it."""
    if raw is None:
        return DASH
    if column.numeric and isinstance(raw, int | float):
        return number_text(column, raw)
    if column.kind == DATE and isinstance(raw, datetime):
        return timezone.localtime(raw).strftime("%Y-%m-%d %H:%M")
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, list | dict) and column.kind != TAGS:
        return json.dumps(raw)
    if isinstance(raw, list):
        return ", ".join(map(str, raw))
    return str(raw) if not isinstance(raw, float) else f"{raw:g}"


def cell(run, column: Column) -> dict:
    """One cell: the column, the value (numbers in the shown unit, for the CSV and the tooltip) and its text."""
    raw = value(run, column)
    shown = text(column, raw)
    title = ""
    if column.to_target and raw is None:
        best = best_reached(run)
        shown = f"{DASH} (best {best:.4f})" if best is not None else DASH
        title = "Never reached the target" + (f"; its best test accuracy is {best:.4f}" if best is not None else "")
    number = isinstance(raw, int | float) and not isinstance(raw, bool) and column.kind != SPEC
    links = [(t, f"tag:{literal(t)}") for t in raw] if column.kind == TAGS and isinstance(raw, list) else []
    return {
        "links": links,
        "target": column.to_target,
        "name": column.name,
        "kind": column.kind,
        "raw": raw,
        "number": number,
        "text": shown,
        "title": title or (shown if len(shown) > 40 else ""),
    }


def stats_text(column: Column, stats) -> str:
    """A group's mean ± std of the column (over its completed runs), in the column's unit."""
    if not stats or stats[0] is None:
        return DASH
    mean, std, _ = stats
    shown = Column(column.name, column.label, NUMBER, column.section, scale=column.scale,
                   digits=column.digits if column.digits is not None else 4, unit="")  # fmt: skip
    return f"{number_text(shown, mean)} ± {number_text(shown, std or 0.0)}{column.unit}"


def key_text(column: Column, key, sweeps: dict[int, str]) -> str:
    """A group's value of a group column (a sweep by its name)."""
    if column.name == "sweep":
        return f"{sweeps.get(key, 'sweep')} #{key}" if key is not None else "not in a sweep"
    if key is None:
        return "(none)"
    return text(column, key)


def cell_html(run, c: dict, sweep_name: str | None) -> SafeString:
    """A cell of the rows template, as HTML: made here, not by a template tag per value, because a
    page has ~600 cells and the template language took most of the page's time drawing them."""
    name = c["name"]
    if name == "status":
        return format_html('<td data-col="status"><span class="badge {} status">{}</span></td>', c["raw"], c["raw"])
    if name == "round":
        return format_html('<td class="num" data-col="round"><span class="round">{}</span> / {}</td>', c["raw"],
                           run.total_rounds)  # fmt: skip
    if name == "tag":
        links = format_html_join(" ", '<a class="badge" href="?q={}">{}</a>', ((quote(q), t) for t, q in c["links"]))
        return format_html('<td data-col="tag">{}</td>', links)
    if name == "sweep" and c["raw"]:
        url = reverse("sweep_detail", args=[c["raw"]])
        return format_html('<td data-col="sweep"><a href="{}">{} #{}</a></td>', url, sweep_name or "sweep", c["raw"])
    if name == "created" and c["raw"]:
        return format_html(
            '<td class="muted" data-col="created" title="{}">{} ago</td>', c["text"], timesince(c["raw"])
        )
    css = ' class="num"' if c["number"] or c["target"] else ""
    title = format_html(' title="{}"', c["title"]) if c["title"] else ""
    return format_html(
        '<td{} data-col="{}"{}><span class="one-line">{}</span></td>', SafeString(css), name, title, c["text"]
    )
