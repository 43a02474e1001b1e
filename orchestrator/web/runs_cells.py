"""How the runs table shows a value: numbers in their column's unit and decimals, a spec value as
the spec has it, dates, and "–" for what a run lacks (a "to target" cell then says the best the run
reached). The CSV download writes the same text."""

from __future__ import annotations

import html
import json
from datetime import datetime
from urllib.parse import quote

from django.urls import reverse
from django.utils import timezone
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


def cell_html(run, c: dict, sweep_name: str | None) -> str:
    """A cell of the rows template, as HTML (every value escaped here; the caller marks the row
    safe): made in Python, not by template tags, because a page has ~600 cells and the template
    language took most of the page's time drawing them."""
    name = c["name"]
    if name == "status":
        return f'<td data-col="status"><span class="badge {e(c["raw"])} status">{e(c["raw"])}</span></td>'
    if name == "round":
        return f'<td class="num" data-col="round"><span class="round">{e(c["raw"])}</span> / {run.total_rounds}</td>'
    if name == "tag":
        links = " ".join(f'<a class="badge" href="?q={e(quote(q))}">{e(t)}</a>' for t, q in c["links"])
        return f'<td data-col="tag">{links}</td>'
    if name == "sweep" and c["raw"]:
        url = reverse("sweep_detail", args=[c["raw"]])
        return f'<td data-col="sweep"><a href="{e(url)}">{e(sweep_name or "sweep")} #{c["raw"]}</a></td>'
    if name == "created" and c["raw"]:
        return f'<td class="muted" data-col="created" title="{e(c["text"])}">{e(timesince(c["raw"]))} ago</td>'
    css = ' class="num"' if c["number"] or c["target"] else ""
    title = f' title="{e(c["title"])}"' if c["title"] else ""
    return f'<td{css} data-col="{e(name)}"{title}><span class="one-line">{e(c["text"])}</span></td>'


def e(value) -> str:
    """HTML-escaped text of a value (quotes too: values land in attributes)."""
    return html.escape(str(value), quote=True)
