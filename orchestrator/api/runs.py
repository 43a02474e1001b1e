"""``GET /api/experiments/``: the runs table over the API, with the page's parameters (``q``, ``columns``,
``sort``, ``group``, ``target``, ``scope``) and the same validation, in pages of ``page_size`` rows.

A row is the experiment as ``ExperimentSerializer`` gives it, plus ``values``: each requested column's
value, numbers in the unit the table shows (MB for ``mb`` and ``mb_to_target``). Grouped, a row is a
group: its ``key`` (a value per group column), ``runs``, ``completed`` and, per numeric column,
``{"mean", "std", "n"}`` over its completed runs. Errors: 400 keyed by the parameter at fault.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from orchestrator.api.serializers import ExperimentSerializer
from orchestrator.experiments import access
from orchestrator.runs import table
from orchestrator.runs.vocabulary import Column
from orchestrator.web.forms.runs_forms import PER_PAGE, RunsTableForm

LIST_PARAMS = [
    OpenApiParameter("q", str, description='A filter query, e.g. "local.lr > 0.05 and tag:baseline" (docs/runs.md)'),
    OpenApiParameter("columns", str, description="Comma-separated columns whose values each row carries"),
    OpenApiParameter("sort", str, description="A column to sort by; a leading - sorts descending"),
    OpenApiParameter("group", str, description="One or two comma-separated columns to group the runs by"),
    OpenApiParameter("target", float, description="The test accuracy of the to-target columns (default 0.8)"),
    OpenApiParameter("page", int, description="1-based"),
    OpenApiParameter("page_size", int, description=f"Rows per page (default {PER_PAGE}, at most 500)"),
    OpenApiParameter("scope", str, enum=access.SCOPES, description="mine, team (my teams') or shared (public link)"),
    OpenApiParameter("status", str, description="Only experiments with this status (the same as q's status = ...)"),
]


class RunRowSerializer(ExperimentSerializer):
    """A row of the table: the experiment, and its requested columns' values (documentation only)."""

    values = serializers.DictField(help_text="Each requested column's value, numbers in the table's unit")

    class Meta(ExperimentSerializer.Meta):
        fields = [*ExperimentSerializer.Meta.fields, "values"]
        read_only_fields = fields


class RunsPageSerializer(serializers.Serializer):
    """``GET /api/experiments/``'s answer (grouped, each result is a group: key, runs, completed, values)."""

    count = serializers.IntegerField(help_text="Matching runs (or groups)")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    columns = serializers.ListField(child=serializers.CharField())
    group = serializers.ListField(child=serializers.CharField())
    target = serializers.FloatField()
    results = RunRowSerializer(many=True)


def _number(column: Column, raw):
    if column.numeric and isinstance(raw, int | float) and not isinstance(raw, bool):
        return raw / column.scale if column.scale != 1 else raw
    return raw


def _link(request: Request, page: int | None) -> str | None:
    if page is None:
        return None
    params = request.query_params.copy()
    params["page"] = str(page)
    return request.build_absolute_uri(f"{request.path}?{params.urlencode()}")


def list_runs(request: Request) -> Response:
    data = request.query_params.copy()
    if "page_size" in data:
        data["per_page"] = data["page_size"]
    form = RunsTableForm(data, user=request.user)
    if not form.is_valid():
        errors = form.error_dict()
        if "per_page" in errors:
            errors["page_size"] = errors.pop("per_page")
        return Response(errors, status=400)
    spec = form.table_spec()
    qs = table.matching(request.user, spec)
    page, size = form.cleaned_data["page"] or 1, form.cleaned_data["per_page"] or PER_PAGE
    if spec.group:
        found, total = table.groups(qs, spec, (page - 1) * size, size)
        results = [_group(g, spec) for g in found]
    else:
        ids, total = table.page(qs, spec, (page - 1) * size, size)
        runs = table.load(request.user, ids, spec)
        rows = ExperimentSerializer(runs, many=True, context={"request": request}).data
        for row, run in zip(rows, runs, strict=True):
            row["values"] = {c.name: _number(c, table.value(run, c)) for c in spec.columns}
        results = rows
    return Response({
        "count": total,
        "next": _link(request, page + 1 if page * size < total else None),
        "previous": _link(request, page - 1 if page > 1 else None),
        "columns": [c.name for c in spec.columns],
        "group": [c.name for c in spec.group],
        "target": spec.ctx.target,
        "results": results,
    })  # fmt: skip


def _group(found: dict, spec: table.TableSpec) -> dict:
    stats = {}
    for name, (mean, std, n) in found["stats"].items():
        column = next(c for c in spec.columns if c.name == name)
        stats[name] = {"mean": _number(column, mean), "std": _number(column, std), "n": n}
    key = {c.name: k for c, k in zip(spec.group, found["key"], strict=True)}
    return {"key": key, "runs": found["runs"], "completed": found["completed"], "values": stats}
