"""The runs table: the runs a user may read, filtered, sorted and paginated in the database, or
grouped by one or two columns with each group's count and mean ± std; and the values of a page's
cells. The page, the CSV download and the API all build their table here.

Sorting reads only the sort key and the ids (a lean query over every matching run); the page's
rows, with their specs and summaries, are loaded for those ids alone.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.db import connection
from django.db.models import Case, Count, FloatField, Q, QuerySet, Value, When, Window
from django.db.models.functions import Cast

from orchestrator.experiments.access import experiments_visible_to, scoped
from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.specs import flatten
from orchestrator.runs.conditions import Context, expression, sort_expressions
from orchestrator.runs.jsonsql import JsonNumber, from_json
from orchestrator.runs.query import literal
from orchestrator.runs.vocabulary import CUSTOM, CUSTOM_FOLDS, NUMBER, SPEC, SUMMARY, Column, Vocabulary
from orchestrator.sweeps.models import Sweep

NEWEST_FIRST = ("-created", "-pk")
MAX_GROUPS = 5000  # a grouping with more groups than this shows the first ones
INNER_LIMIT = 10**9  # no table has more runs: only there to keep the grouped query's inner query apart


@dataclass
class TableSpec:
    """One table's request, as the form (``orchestrator.web.forms.runs_forms``) validated it."""

    ctx: Context
    condition: Q = field(default_factory=Q)  # the query's (conditions.to_q)
    query: str = ""
    columns: list[Column] = field(default_factory=list)
    group: list[Column] = field(default_factory=list)
    sort: Column | None = None
    descending: bool = True
    scope: str | None = None

    def order(self) -> list:
        if self.sort is None:
            return list(NEWEST_FIRST)
        return [*sort_expressions(self.sort, self.ctx, self.descending), *NEWEST_FIRST]


def matching(user, spec: TableSpec) -> QuerySet[Experiment]:
    """The runs ``user`` may read that the query keeps: a filter never widens what they may see."""
    qs = scoped(experiments_visible_to(user), user, spec.scope)
    return qs.filter(spec.condition)


def page_ids(qs: QuerySet, spec: TableSpec, offset: int, limit: int) -> list[int]:
    return list(qs.order_by(*spec.order()).values_list("pk", flat=True)[offset : offset + limit])


def page(qs: QuerySet, spec: TableSpec, offset: int, limit: int) -> tuple[list[int], int]:
    """A page's ids in the table's order, and how many runs match: one pass over the matching runs
    (the count rides along as a window), where a COUNT query would filter them all a second time."""
    counted = qs.order_by(*spec.order()).annotate(matching=Window(Count("pk"))).values_list("pk", "matching")
    rows = list(counted[offset : offset + limit])
    if rows:
        return [pk for pk, _ in rows], rows[0][1]
    return [], qs.count()  # a page past the end says how many there are


def load(user, ids: list[int], spec: TableSpec) -> list[Experiment]:
    """The runs ``ids``, in that order, with what their cells read (summary, owner, team, sweep,
    the target columns as ``t_<name>``)."""
    targets = {f"t_{c.name}": expression(c, spec.ctx) for c in spec.columns if c.to_target}
    qs = experiments_visible_to(user).filter(pk__in=ids).select_related("owner", "team", "sweep", "summary")
    by_id = {e.pk: e for e in qs.annotate(**targets)}
    return [by_id[pk] for pk in ids if pk in by_id]


def iterate(user, qs: QuerySet, spec: TableSpec, chunk: int = 500) -> Iterator[Experiment]:
    """Every matching run in the table's order, loaded ``chunk`` at a time (the CSV download)."""
    ids = list(qs.order_by(*spec.order()).values_list("pk", flat=True))
    for start in range(0, len(ids), chunk):
        yield from load(user, ids[start : start + chunk], spec)


def _summary(run: Experiment):
    try:
        return run.summary
    except Experiment.summary.RelatedObjectDoesNotExist:
        return None


def _dig(spec, path: str):
    node = spec
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def value(run: Experiment, column: Column):
    """The column's value for a run loaded by ``load``, as stored (bytes in bytes)."""
    if column.kind == SPEC:
        return _dig(run.spec, column.path)
    if column.to_target:
        return getattr(run, f"t_{column.name}", None)
    summary = _summary(run)
    if column.kind == CUSTOM:
        folds = (summary.custom if summary else {}).get(column.path)
        return folds[CUSTOM_FOLDS.index(column.name.rsplit(".", 1)[1])] if folds else None
    if column.section == SUMMARY:
        return getattr(summary, column.path.removeprefix("summary__")) if summary else None
    node = run
    for part in column.path.split("__"):
        node = None if node is None else getattr(node, "pk" if part == "pk" else part)
    return node


def best_reached(run: Experiment):
    """The best test accuracy the run reached (what a "to target" cell shows when it never did)."""
    summary = _summary(run)
    return summary.best_accuracy if summary else None


def varying(runs: list[Experiment]) -> list[str]:
    """The spec fields whose values differ among ``runs`` (the column picker lists them first)."""
    flat = [flatten(r.spec or {}) for r in runs]
    keys = sorted({k for f in flat for k in f})
    return [k for k in keys if len({repr(f.get(k)) for f in flat}) > 1]


# -- grouping -------------------------------------------------------------------------------------


def aggregated(spec: TableSpec) -> list[Column]:
    """The columns a group row shows as mean ± std: the numeric ones it is not grouped by."""
    return [c for c in spec.columns if c.kind in (SPEC, NUMBER, CUSTOM) and c not in spec.group]


def _mean_input(column: Column, spec: TableSpec):
    number = JsonNumber("spec", column.keys) if column.kind == SPEC else expression(column, spec.ctx)
    return Cast(number, FloatField())  # squares of big integers (bytes) overflow no 64-bit column


def _std(n: int, mean: float | None, mean_square: float | None) -> float | None:
    """The sample standard deviation from a group's count, mean and mean of squares: SQL computes
    those two everywhere, where Django's SQLite STDDEV_SAMP fails on a group with a single value."""
    if not n or mean is None:
        return None
    if n == 1:
        return 0.0  # as sweeps.stats.mean_std has it
    return math.sqrt(max(0.0, mean_square - mean * mean) * n / (n - 1))


def groups(qs: QuerySet, spec: TableSpec, offset: int, limit: int) -> tuple[list, int]:
    """The table's groups, ``limit`` of them from ``offset`` (in the order of their values, or of the
    sort column's mean), and how many there are: each with its key (a value per group column), run
    count, completed count, and the mean and sample std of each numeric column over its completed runs.

    The runs' keys and values are computed once per run in an inner query, which the outer one
    groups: aggregating the expressions directly made SQLite evaluate each JSON path and "to
    target" subquery once per aggregate (4 times a column), 160 ms of a 10,000-run table. The
    groups are ordered here, which spares the database the typed copies of the keys that order them.
    """
    means = aggregated(spec)
    inner = {f"g{i}": expression(c, spec.ctx) for i, c in enumerate(spec.group)}
    keys = list(inner)
    inner.update({f"v{i}": _mean_input(c, spec) for i, c in enumerate(means)})
    inner["done"] = Case(When(status=Status.COMPLETED, then=Value(1)), default=Value(0))
    # The LIMIT keeps SQLite and PostgreSQL from merging the inner query into the outer one.
    sql, params = qs.order_by().annotate(**inner).values(*inner)[:INNER_LIMIT].query.sql_with_params()
    q = connection.ops.quote_name
    select = [*map(q, keys), "COUNT(*)", "SUM(done)"]
    for i in range(len(means)):
        v = q(f"v{i}")
        select += [f"COUNT(CASE WHEN done = 1 THEN {v} END)", f"AVG(CASE WHEN done = 1 THEN {v} END)",
                   f"AVG(CASE WHEN done = 1 THEN {v} * {v} END)"]  # fmt: skip
    outer = f"SELECT {', '.join(select)} FROM ({sql}) AS runs GROUP BY {', '.join(map(q, keys))} LIMIT {MAX_GROUPS}"
    with connection.cursor() as cursor:
        cursor.execute(outer, params)
        found = [_group_row(dict(zip(keys, row, strict=False)), row[len(keys) :], spec) for row in cursor.fetchall()]
    # Ordered here (the groups are few): by their values, numbers in numeric order before texts,
    # or by the mean of the sort column, groups without one last either way.
    found.sort(key=lambda g: [_value_order(k) for k in g["key"]])
    if spec.sort in means:
        found.sort(key=lambda g: _mean_order(g["stats"][spec.sort.name][0], spec.descending))
    return found[offset : offset + limit], len(found)


def _value_order(value) -> tuple:
    if value is None:
        return (3, 0, "")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, value) if isinstance(value, str) else (2, 0, json.dumps(value, sort_keys=True))


def _mean_order(mean, descending: bool) -> tuple:
    return (1, 0.0) if mean is None else (0, -mean if descending else mean)


def _group_row(key_values: dict, counts: tuple, spec: TableSpec) -> dict:
    key = [from_json(key_values[f"g{i}"]) if c.kind == SPEC else key_values[f"g{i}"] for i, c in enumerate(spec.group)]
    stats = {}
    for i, c in enumerate(aggregated(spec)):
        n, mean, square = counts[2 + 3 * i : 5 + 3 * i]
        stats[c.name] = (mean, _std(n, mean, square), n)
    return {"key": key, "runs": counts[0], "completed": int(counts[1] or 0), "stats": stats}


def drill_down(spec: TableSpec, key: list) -> str:
    """The query of one group's runs: the table's query and the group's values."""
    parts = [f"({spec.query})"] if spec.query.strip() else []
    parts += [f"{c.name} = {literal(v)}" for c, v in zip(spec.group, key, strict=False)]
    return " and ".join(parts)


def sweep_names(ids) -> dict[int, str]:
    return dict(Sweep.objects.filter(pk__in=[i for i in ids if i is not None]).values_list("pk", "name"))


# -- what a user's query may name -------------------------------------------------------------------

OBSERVED_RUNS = 200  # the newest external runs whose config keys and metric names join the vocabulary


def vocabulary_for(user) -> Vocabulary:
    """The spec schema's fields, plus the config keys and custom metrics of the newest external runs
    ``user`` may read (a script's config is free-form; a native spec follows the schema)."""
    rows = (
        experiments_visible_to(user)
        .filter(kind=Kind.EXTERNAL)
        .order_by("-created")
        .values_list("spec", "summary__custom")[:OBSERVED_RUNS]
    )
    fields, metrics = set(), set()
    for spec, custom in rows:
        fields.update(flatten(spec) if isinstance(spec, dict) else ())
        metrics.update(custom or ())
    return Vocabulary(fields, metrics)
