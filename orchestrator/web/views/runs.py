"""The runs table (``/``): any spec field, summary, "to target" figure or custom metric as a column,
a query filter, sorting and grouping done in the database, pages of rows, saved views, and the
table as CSV. Every run shown comes through ``experiments_visible_to``: a query, a shared view or a
link narrows what the reader may see, never widens it.
"""

from __future__ import annotations

import csv
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import SafeString

from orchestrator.experiments.access import SCOPES
from orchestrator.experiments.models import Status
from orchestrator.external.liveness import mark_crashed
from orchestrator.runs import table
from orchestrator.runs.saved import TablePrefs, views_for
from orchestrator.runs.vocabulary import DEFAULT_COLUMNS, FIXED, RUN, SUMMARY, TARGET
from orchestrator.web.forms.runs_forms import PER_PAGE, RunsTableForm, SavedViewForm
from orchestrator.web.runs_cells import cell, cell_html, key_text, stats_text, text

PARAMS = ("q", "columns", "group", "sort", "target", "scope")
GROUP_MEMBERS = 20  # runs shown under an opened group; its drill-down link lists them all
CSV_LIMIT = 100_000


def prefs_for(user) -> TablePrefs:
    return TablePrefs.objects.filter(user=user).first() or TablePrefs(user=user)


def table_form(request: HttpRequest) -> RunsTableForm:
    prefs = prefs_for(request.user)
    return RunsTableForm(
        request.GET, user=request.user, default_columns=prefs.columns or DEFAULT_COLUMNS, default_target=prefs.target
    )


def params_of(form: RunsTableForm, spec: table.TableSpec) -> dict[str, str]:
    """The table as URL parameters, columns and target spelled out (links and saved views carry them)."""
    sort = f"{'-' if spec.descending else ''}{spec.sort.name}" if spec.sort else ""
    values = {
        "q": spec.query,
        "columns": ",".join(c.name for c in spec.columns),
        "group": ",".join(c.name for c in spec.group),
        "sort": sort,
        "target": f"{spec.ctx.target:g}",
        "scope": form.cleaned_data.get("scope") or "",
    }
    return values


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    mark_crashed()  # external runs gone silent: detected on read, no daemon
    form = table_form(request)
    if not form.is_valid():  # the page again, the query as typed, each error naming its parameter
        params = {k: request.GET.get(k, "") for k in PARAMS}
        ctx = {"form": form, "errors": form.error_dict(), "q": params["q"], "params": params, **_chrome(request, form)}
        return render(request, "orchestrator/experiment_list.html", ctx, status=400)
    spec = form.table_spec()
    qs = table.matching(request.user, spec)
    if request.GET.get("partial") == "rows":  # an opened group's runs, for the page's script
        runs = table.load(request.user, table.page_ids(qs, spec, 0, GROUP_MEMBERS), spec)
        return render(request, "orchestrator/_run_rows.html", {"rows": _rows(runs, spec), "spec": spec})
    per_page = form.cleaned_data["per_page"] or PER_PAGE
    page = form.cleaned_data["page"] or 1
    params = params_of(form, spec)
    ctx = {"form": form, "spec": spec, "params": params, "q": spec.query, **_chrome(request, form)}
    ctx["query_string"] = urlencode({k: v for k, v in params.items() if v})
    if spec.group:
        found, total = table.groups(qs, spec, (page - 1) * per_page, per_page)
        ctx["groups"] = _group_rows(found, spec, ctx["params"])
    else:
        ids, total = table.page(qs, spec, (page - 1) * per_page, per_page)
        runs = table.load(request.user, ids, spec)
        ctx["rows"] = _rows(runs, spec)
        ctx["varying"] = table.varying(runs)
    ctx.update(_pages(total, page, per_page), headers=_headers(spec), total=total)
    ctx["picker"] = _picker(form, spec, ctx.get("varying", []))
    return render(request, "orchestrator/experiment_list.html", ctx)


def _chrome(request: HttpRequest, form: RunsTableForm) -> dict:
    """What the page shows whatever the table: scopes, saved views, the names for autocompletion."""
    vocabulary = form.vocabulary
    fields = [{"name": n, "doc": _doc(n, form), "group": vocabulary.get(n).groupable} for n in vocabulary.names()]
    return {
        "scopes": ("all", *SCOPES),
        "scope": request.GET.get("scope") or "all",
        "statuses": Status.values,
        "saved_views": list(views_for(request.user)),
        "view_id": request.GET.get("view", ""),
        "save_form": SavedViewForm(user=request.user),
        "fields": fields,
        "picker": [],
    }


def _doc(name: str, form: RunsTableForm) -> str:
    column = FIXED.get(name)
    return column.doc or column.label if column else ("custom metric" if name.startswith("custom.") else "spec")


def _rows(runs, spec: table.TableSpec) -> list[dict]:
    sweeps = table.sweep_names({r.sweep_id for r in runs})
    base = reverse("experiment_detail", args=[0]).removesuffix("0/")  # one reverse for the page's links
    rows = []
    for r in runs:
        cells = [cell(r, c) for c in spec.columns]
        html = SafeString("".join(cell_html(r, c, sweeps.get(r.sweep_id)) for c in cells))
        rows.append({"run": r, "url": f"{base}{r.pk}/", "cells": cells, "html": html})
    return rows


def _headers(spec: table.TableSpec) -> list[dict]:
    out = []
    for c in spec.columns:
        current = spec.sort is not None and spec.sort.name == c.name
        nxt = c.name if current and spec.descending else f"-{c.name}"
        out.append({"column": c, "sort": nxt, "sorted": ("desc" if spec.descending else "asc") if current else ""})
    return out


def _group_rows(found: list[dict], spec: table.TableSpec, params: dict) -> list[dict]:
    sweeps = table.sweep_names({g["key"][i] for g in found for i, c in enumerate(spec.group) if c.name == "sweep"})
    rows = []
    for g in found:
        drill = {k: v for k, v in {**params, "q": table.drill_down(spec, g["key"])}.items() if v and k != "group"}
        rows.append({
            **g,
            "labels": [(c, key_text(c, k, sweeps)) for c, k in zip(spec.group, g["key"], strict=True)],
            "cells": [stats_text(c, g["stats"].get(c.name)) if c.name in g["stats"] else "" for c in spec.columns],
            "drill": urlencode(drill),
            "sweep": g["key"][0] if spec.group[0].name == "sweep" else None,
        })  # fmt: skip
    return rows


def _pages(total: int, page: int, per_page: int) -> dict:
    last = max(1, -(-total // per_page))
    return {"page": page, "last_page": last, "per_page": per_page, "first_row": (page - 1) * per_page + 1}


def _picker(form: RunsTableForm, spec: table.TableSpec, varying: list[str]) -> list[tuple[str, list[str]]]:
    """The column picker's sections: the chosen columns, the spec fields that vary among the shown
    runs, then every other name by kind."""
    chosen = [c.name for c in spec.columns]
    names = form.vocabulary.names()
    by_section = {s: [n for n, c in FIXED.items() if c.section == s] for s in (RUN, SUMMARY, TARGET)}
    spec_fields = [n for n in names if n not in FIXED and not n.startswith("custom.")]
    sections = [
        ("Shown", chosen),
        ("Vary among these runs", [n for n in varying if n not in chosen]),
        ("Run", by_section[RUN]),
        ("Summaries", by_section[SUMMARY]),
        ("To target", by_section[TARGET]),
        ("Spec", [n for n in spec_fields if n not in varying]),
        ("Custom metrics", [n for n in names if n.startswith("custom.")]),
    ]
    return [(title, [n for n in items if title == "Shown" or n not in chosen]) for title, items in sections if items]


@login_required
def runs_csv(request: HttpRequest) -> HttpResponse:
    """The table as shown (its columns, query, sort and grouping), every matching row, as CSV."""
    form = table_form(request)
    if not form.is_valid():
        return HttpResponse("\n".join(f"{k}: {v[0]}" for k, v in form.error_dict().items()), status=400,
                            content_type="text/plain; charset=utf-8")  # fmt: skip
    spec = form.table_spec()
    qs = table.matching(request.user, spec)
    lines = _group_lines(qs, spec) if spec.group else _run_lines(request.user, qs, spec)
    response = StreamingHttpResponse(_csv(lines), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="runs.csv"'
    return response


def _run_lines(user, qs, spec: table.TableSpec):
    yield ["id", "name", *(c.name for c in spec.columns)]
    for run in table.iterate(user, qs, spec):
        yield [run.pk, run.name, *(_csv_value(run, c) for c in spec.columns)]


def _group_lines(qs, spec: table.TableSpec):
    aggregated = table.aggregated(spec)
    yield [*(c.name for c in spec.group), "runs", "completed", *(f"{c.name} {s}" for c in aggregated for s in ("mean", "std"))]  # fmt: skip
    found, _ = table.groups(qs, spec, 0, CSV_LIMIT)
    for g in found:
        stats = []
        for c in aggregated:
            mean, std, _ = g["stats"][c.name]
            stats += [_number(mean, c), _number(std, c)]
        keys = ["" if k is None else text(c, k) for c, k in zip(spec.group, g["key"], strict=True)]
        yield [*keys, g["runs"], g["completed"], *stats]


def _number(v, column) -> str:
    """A number in the column's unit (MB for bytes), at full precision: the CSV is read by programs."""
    return "" if v is None else f"{v / column.scale:.10g}"


def _csv_value(run, column) -> str:
    raw = table.value(run, column)
    if raw is None:
        return ""
    if column.numeric:
        return _number(raw, column) if isinstance(raw, int | float) else str(raw)
    return text(column, raw)


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv(lines):
    writer = csv.writer(_Echo())
    for line in lines:
        yield writer.writerow(line)
