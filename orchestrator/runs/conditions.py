"""A parsed query (``query.py``) as Django ORM conditions, and each column as the SQL expression the
table sorts and groups by: columns of the run and of its summary row directly, spec fields and
custom metrics through the JSON expressions of ``jsonsql.py``, the "to target" figures as one
indexed subquery on the run's ``TargetStep`` rows. Every value reaches the database as a parameter.

A condition on a value a run lacks is false, and its negation true: ``not local.lr > 0.05`` keeps
the runs that have no ``local.lr``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta

from django.db.models import Expression, F, OuterRef, Q, Subquery
from django.db.models.lookups import (
    Exact,
    GreaterThan,
    GreaterThanOrEqual,
    IContains,
    IExact,
    IsNull,
    LessThan,
    LessThanOrEqual,
)
from django.utils import timezone

from orchestrator.runs.jsonsql import JsonBool, JsonHas, JsonNumber, JsonRaw, JsonText
from orchestrator.runs.query import And, Not, Or, QueryError, Term, Value, suggest
from orchestrator.runs.run_summary import TargetStep
from orchestrator.runs.saved import DEFAULT_TARGET
from orchestrator.runs.vocabulary import CHOICE, CUSTOM, DATE, NUMBER, SPEC, TAGS, TEXT, Column, Vocabulary

ORDER = {"=": Exact, ">": GreaterThan, ">=": GreaterThanOrEqual, "<": LessThan, "<=": LessThanOrEqual}
COMPARE = ("=", "!=", ">", ">=", "<", "<=")
MATCH = ("=", "!=", "~", "!~")
_AGE = re.compile(r"(\d{1,6}(?:\.\d+)?)([mhdw])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
MAX_AGE_DAYS = 365 * 200


@dataclass
class Context:
    """What a query is judged against besides the runs: the names it may use, the view's target
    accuracy and the time ("7d" is seven days before ``now``)."""

    vocabulary: Vocabulary
    target: float = DEFAULT_TARGET
    now: datetime = field(default_factory=timezone.now)
    negated: bool = False  # under an odd number of "not"s: a condition on a missing value must say False


def expression(column: Column, ctx: Context) -> Expression:
    """The column as one SQL expression (spec fields: their JSON text, which groups equal values)."""
    if column.to_target:
        steps = TargetStep.objects.filter(experiment=OuterRef("pk"), value__gte=ctx.target).order_by("value")
        return Subquery(steps.values(column.path)[:1])
    if column.kind == SPEC:
        return JsonRaw("spec", column.keys)
    if column.kind == CUSTOM:
        return JsonNumber("summary__custom", column.keys)
    return F(column.path)


def sort_expressions(column: Column, ctx: Context, descending: bool) -> list:
    """ORDER BY terms for the column, runs without a value last either way; a spec field orders its
    numbers, then its strings, then anything else."""
    if column.kind == SPEC:
        exprs = [JsonNumber("spec", column.keys), JsonText("spec", column.keys), JsonRaw("spec", column.keys)]
    else:
        exprs = [expression(column, ctx)]
    return [e.desc(nulls_last=True) if descending else e.asc(nulls_last=True) for e in exprs]


def to_q(node, ctx: Context) -> Q:
    """The conditions of a parsed query (``query.parse``; None keeps every run)."""
    if node is None:
        return Q()
    if isinstance(node, Not):
        return ~to_q(node.node, replace(ctx, negated=not ctx.negated))
    if isinstance(node, And | Or):
        combined = Q()
        for child in node.nodes:
            q = to_q(child, ctx)
            combined = (combined & q) if isinstance(node, And) else (combined | q if combined else q)
        return combined
    return _term(node, ctx)


def _term(term: Term, ctx: Context) -> Q:
    if not term.field:
        return _text_search(term.value.text)
    try:
        column = ctx.vocabulary.get(term.field)
    except QueryError as e:
        raise QueryError(str(e), term.position) from None
    try:
        return _condition(column, term.op, term.value, ctx)
    except QueryError as e:
        raise QueryError(str(e), term.position) from None


def _text_search(text: str) -> Q:
    return Q(name__icontains=text) | Q(description__icontains=text) | Q(JsonHas("tags", text, contains=True))


def _condition(column: Column, op: str, value: Value, ctx: Context) -> Q:
    kind = column.kind
    allowed = {NUMBER: COMPARE, CUSTOM: COMPARE, DATE: COMPARE, TEXT: MATCH, CHOICE: ("=", "!="), TAGS: MATCH}
    if kind == SPEC:
        return _spec(column, op, value, ctx)
    if op not in allowed[kind]:
        raise QueryError(f'"{op}" does not apply to the {_kind_name(kind)} field {column.name} (use {", ".join(allowed[kind])})')  # fmt: skip
    if kind == TAGS:
        has = Q(JsonHas("tags", value.text, contains=op in ("~", "!~")))
        return has if op in ("=", "~") else ~has
    expr = expression(column, ctx)
    if _is_null(value):
        return _null(expr, op, column)
    if kind in (NUMBER, CUSTOM):
        return _compare(expr, op, _number(column, value) * column.scale, ctx)
    if kind == DATE:
        return _date(column, expr, op, value, ctx)
    if kind == CHOICE:
        if value.text not in column.choices:
            raise QueryError(f'{column.name} is one of {", ".join(column.choices)}, not "{value.text}"{suggest(value.text, column.choices)}')  # fmt: skip
        return _compare(expr, op, value.text, ctx)
    return _compare(expr, op, value.text, ctx, text=True)


def _spec(column: Column, op: str, value: Value, ctx: Context) -> Q:
    """A spec field: the value's own type says how it compares (0.05 a number, scaffold or "0.05" a string)."""
    raw = JsonRaw("spec", column.keys)
    if _is_null(value):
        return _null(raw, op, column, json_null=True)
    if not value.quoted and value.text.lower() in ("true", "false"):
        if op not in ("=", "!="):
            raise QueryError(f'"{op}" does not compare {column.name} with true or false (use = or !=)')
        return _compare(JsonBool("spec", column.keys), op, int(value.text.lower() == "true"), ctx)
    number = None if value.quoted else _float(value.text)
    if number is not None:
        return _compare(JsonNumber("spec", column.keys), op, number, ctx)
    if op not in MATCH:
        raise QueryError(f'"{op}" compares {column.name} with a number, and "{value.text}" is not one (text takes =, !=, ~, !~)')  # fmt: skip
    return _compare(JsonText("spec", column.keys), op, value.text, ctx)


def _compare(expr, op: str, value, ctx: Context, text: bool = False) -> Q:
    """``expr op value``, false where ``expr`` is NULL (and so true under a "not"); ``text``: = ignores case.

    SQL's comparison with NULL is NULL, which a WHERE drops as it drops false, but which NOT keeps
    NULL: the presence test makes it false where it must be (a negative operator, or under a "not").
    Left out elsewhere, it spares the database evaluating each JSON path twice."""
    present = Q(IsNull(expr, False))
    if op in ("~", "!~"):  # contains, whatever the case
        match = Q(IContains(expr, value))
    else:
        match = Q((IExact if text else Exact)(expr, value)) if op in ("=", "!=") else Q(ORDER[op](expr, value))
    if op.startswith("!"):
        return present & ~match
    return present & match if ctx.negated else match


def _null(expr, op: str, column: Column, json_null: bool = False) -> Q:
    if op not in ("=", "!="):
        raise QueryError(f"{column.name} {op} null: null takes = or != only")
    missing = Q(IsNull(expr, True)) | (Q(Exact(expr, "null")) if json_null else Q())
    return missing if op == "=" else ~missing


def _is_null(value: Value) -> bool:
    return not value.quoted and value.text.lower() == "null"


def _float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _number(column: Column, value: Value) -> float:
    number = None if value.quoted else _float(value.text)
    if number is None:
        raise QueryError(f'{column.name} compares with a number, not "{value.text}"')
    return number


def _date(column: Column, expr, op: str, value: Value, ctx: Context) -> Q:
    start, end = _moment(column, value.text, ctx)
    if op in ("=", "!=") and end is not None:  # a date is the whole day
        within = Q(GreaterThanOrEqual(expr, start)) & Q(LessThan(expr, end))
        return Q(IsNull(expr, False)) & (within if op == "=" else ~within)
    return _compare(expr, op, start, ctx)


def _moment(column: Column, text: str, ctx: Context) -> tuple[datetime, datetime | None]:
    """The instant ``text`` names, and for a whole day the instant it ends."""
    if m := _AGE.fullmatch(text):
        delta = timedelta(**{_AGE_UNITS[m.group(2)]: float(m.group(1))})
        if delta > timedelta(days=MAX_AGE_DAYS):
            raise QueryError(f"{column.name}: {text} is further back than {MAX_AGE_DAYS // 365} years")
        return ctx.now - delta, None
    try:
        day = date.fromisoformat(text)
        start = timezone.make_aware(datetime(day.year, day.month, day.day))
        return start, start + timedelta(days=1)
    except (ValueError, OverflowError):
        pass
    try:
        moment = datetime.fromisoformat(text)
        return (moment if timezone.is_aware(moment) else timezone.make_aware(moment)), None
    except (ValueError, OverflowError):
        raise QueryError(
            f'{column.name} compares with a date (2026-01-31), a time (2026-01-31T12:00) or an age (30m, 12h, 7d, 2w), not "{text}"'  # noqa: E501
        ) from None


def _kind_name(kind: str) -> str:
    return {NUMBER: "number", CUSTOM: "number", DATE: "date", TEXT: "text", CHOICE: "choice", TAGS: "tag"}[kind]
