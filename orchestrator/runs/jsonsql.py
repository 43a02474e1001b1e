"""SQL over a JSON column that means the same on SQLite and PostgreSQL: a spec field (or a custom
metric) as a number, a string, a boolean or its JSON text, and tag membership; the database reads
the specs, Python never loads them to filter.

Each value is typed: ``JsonNumber`` is NULL where the field holds a string, so ``local.lr > 0.05``
never matches a run whose ``lr`` is the text "0.1" (SQLite would order any text above any number,
PostgreSQL's jsonb the other way round). The path is always a query parameter, never SQL text.
"""

from __future__ import annotations

import json

from django.db.models import BooleanField, Expression, F, FloatField, IntegerField, TextField
from django.db.models.fields.json import compile_json_path


class _JsonAt(Expression):
    """A value at ``keys`` inside the JSON column ``column`` (an ORM path, e.g. ``summary__custom``)."""

    sqlite = ""  # templates: {c} the column, {p} the path parameter
    postgresql = ""

    def __init__(self, column: str | Expression, keys: tuple[str | int, ...], output_field=None):
        super().__init__(output_field=output_field or self.output_field_class())
        self.column = F(column) if isinstance(column, str) else column
        self.keys = tuple(keys)

    def get_source_expressions(self):
        return [self.column]

    def set_source_expressions(self, exprs):
        (self.column,) = exprs

    def _sql(self, compiler, connection, template: str, path) -> tuple[str, list]:
        column_sql, column_params = compiler.compile(self.column)
        parts, params = [], []
        # Each placeholder in order: the column's SQL (with its params) or the path parameter.
        for i, chunk in enumerate(template.split("{")):
            if i == 0:
                parts.append(chunk)
                continue
            name, rest = chunk[0], chunk[2:]
            parts.append((column_sql if name == "c" else "%s") + rest)
            params.extend(column_params if name == "c" else [path])
        return "".join(parts), params

    def as_sqlite(self, compiler, connection, **extra):
        return self._sql(compiler, connection, self.sqlite, compile_json_path(self.keys))

    def as_postgresql(self, compiler, connection, **extra):
        return self._sql(compiler, connection, self.postgresql, [str(k) for k in self.keys])

    def as_sql(self, compiler, connection, **extra):
        raise NotImplementedError(f"{type(self).__name__} supports SQLite and PostgreSQL, not {connection.vendor}")


class JsonNumber(_JsonAt):
    """The field as a number; NULL when it is missing or not a number."""

    output_field_class = FloatField
    sqlite = "(CASE WHEN json_type({c}, {p}) IN ('integer', 'real') THEN json_extract({c}, {p}) END)"
    postgresql = "(CASE WHEN jsonb_typeof({c} #> {p}) = 'number' THEN ({c} #>> {p})::double precision END)"


class JsonText(_JsonAt):
    """The field as a string; NULL when it is missing or not a string."""

    output_field_class = TextField
    sqlite = "(CASE WHEN json_type({c}, {p}) = 'text' THEN json_extract({c}, {p}) END)"
    postgresql = "(CASE WHEN jsonb_typeof({c} #> {p}) = 'string' THEN {c} #>> {p} END)"


class JsonBool(_JsonAt):
    """The field as 1 (true) or 0 (false); NULL when it is missing or not a boolean."""

    output_field_class = IntegerField
    sqlite = "(CASE json_type({c}, {p}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 END)"
    postgresql = (
        "(CASE jsonb_typeof({c} #> {p}) WHEN 'boolean' THEN (CASE WHEN ({c} #>> {p}) = 'true' THEN 1 ELSE 0 END) END)"  # noqa: E501
    )


class JsonRaw(_JsonAt):
    """The field's JSON text (``0.05``, ``"scaffold"``, ``true``, ``null``); NULL when it is missing.
    Equal values give equal text, so runs group by it; ``from_json`` reads it back."""

    output_field_class = TextField
    # SQLite 3.38 and later: its -> operator is exactly this, in one call (the grouped table's keys).
    sqlite_arrow = "({c} -> {p})"
    sqlite = (
        "(CASE WHEN json_type({c}, {p}) IS NULL THEN NULL WHEN json_type({c}, {p}) IN ('true', 'false', 'null') "
        "THEN json_type({c}, {p}) WHEN json_type({c}, {p}) IN ('object', 'array') THEN json_extract({c}, {p}) "
        "ELSE json_quote(json_extract({c}, {p})) END)"
    )
    postgresql = "(({c} #> {p})::text)"

    def as_sqlite(self, compiler, connection, **extra):
        template = self.sqlite_arrow if connection.Database.sqlite_version_info >= (3, 38) else self.sqlite
        return self._sql(compiler, connection, template, compile_json_path(self.keys))


class JsonHas(Expression):
    """True when the JSON list ``column`` holds the string ``value`` (tag membership); with
    ``contains``, a string that contains ``value`` (case-insensitive)."""

    output_field = BooleanField()
    conditional = True

    def __init__(self, column: str, value: str, contains: bool = False):
        super().__init__()
        self.column, self.value, self.contains = F(column), value, contains

    def get_source_expressions(self):
        return [self.column]

    def set_source_expressions(self, exprs):
        (self.column,) = exprs

    def _pattern(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"%{escaped}%"

    def as_sqlite(self, compiler, connection, **extra):
        sql, params = compiler.compile(self.column)
        test = "json_each.value LIKE %s ESCAPE '\\'" if self.contains else "json_each.value = %s"
        value = self._pattern() if self.contains else self.value
        return f"EXISTS (SELECT 1 FROM json_each({sql}) WHERE json_each.type = 'text' AND {test})", [*params, value]

    def as_postgresql(self, compiler, connection, **extra):
        sql, params = compiler.compile(self.column)
        if self.contains:
            elements = f"SELECT 1 FROM jsonb_array_elements_text({sql}) AS tag(v) WHERE tag.v ILIKE %s"
            return f"(jsonb_typeof({sql}) = 'array' AND EXISTS ({elements}))", [*params, *params, self._pattern()]
        return f"({sql} @> jsonb_build_array(%s::text))", [*params, self.value]

    def as_sql(self, compiler, connection, **extra):
        raise NotImplementedError(f"JsonHas supports SQLite and PostgreSQL, not {connection.vendor}")


def from_json(text: str | None):
    """A ``JsonRaw`` value as Python (None for a missing field)."""
    return None if text is None else json.loads(text)
