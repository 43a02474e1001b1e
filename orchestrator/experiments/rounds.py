"""An experiment's rounds as the pages, the API and the report show them: the list of result
dicts, the rounds table and the CSV file. Every one reads the engine's ``ROUND_RESULT_FIELDS``,
plus ``worker``: where the round ran (the database knows it; the engine does not)."""

from __future__ import annotations

import csv
from typing import IO, NamedTuple

from django.http import HttpResponse

from fedweb_engine.results import round_fields
from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS

# A round as the pages and downloads list it: the engine's result, then the worker that ran it
# ("" through a public link, which names no worker host: orchestrator.experiments.public).
ROUND_FIELDS = (*ROUND_RESULT_FIELDS, "worker")


class Column(NamedTuple):
    """A column of the rounds table: a RoundResult field, its heading, and how it is shown."""

    field: str
    label: str
    digits: int | None = None  # decimals; None shows the value as it is
    scale: float = 1.0  # the value is divided by this (bytes -> MB)
    when: str = ""  # shown only for runs that record this field


# The rounds table shows the fields declared with a ``Column`` (fedweb_engine/results/round_fields.py), then
# where the round ran; the page's script reads the same list (page data ``table_columns``) to add
# the rows that arrive live. A column declared ``when`` a field (the ranks of a distributed run) is
# shown for runs that record it, or whose spec asks for it (before their first round).
TABLE_COLUMNS = (
    *(Column(f.name, c.label, c.digits, c.scale, c.when) for f, c in round_fields.columns()),
    Column("worker", "Worker"),
)


def round_dict(row, *, public: bool = False) -> dict:
    """A RoundMetric row as ``ROUND_FIELDS``; ``public`` leaves out the worker's host name."""
    return {**row.to_result_dict(), "worker": "" if public else row.worker}


def rounds_of(experiment, *, public: bool = False) -> list[dict]:
    """Every recorded round of ``experiment``, oldest first, as ``ROUND_FIELDS`` dicts."""
    return [round_dict(row, public=public) for row in experiment.rounds.order_by("round")]


def shown_columns(rounds: list[dict], spec: dict | None = None) -> list[Column]:
    """The columns of a run's table: every column, less those ``when`` a field the run does not record."""
    asked = _asks_for_ranks(spec)
    return [c for c in TABLE_COLUMNS if not c.when or asked or any(r.get(c.when) is not None for r in rounds)]


def table_rows(rounds: list[dict], spec: dict | None = None) -> list[list[str]]:
    """The rounds table's cells, newest round first, formatted as ``TABLE_COLUMNS`` says."""
    columns = shown_columns(rounds, spec)
    return [[_cell(r.get(c.field), c) for c in columns] for r in reversed(rounds)]


def table_columns(rounds: list[dict] | None = None, spec: dict | None = None) -> list[dict]:
    """The shown columns as JSON for the page's script."""
    return [c._asdict() for c in shown_columns(rounds or [], spec)]


def _asks_for_ranks(spec: dict | None) -> bool:
    compute = (spec or {}).get("compute") or {}
    ranks = compute.get("ranks", compute.get("shards", 1))
    return ranks not in (1, None)


def _cell(value, column: Column) -> str:
    if value is None or value == "":
        return "–"
    if isinstance(value, list):  # one value per rank
        return ", ".join(_cell(v, column) for v in value)
    if column.digits is None:
        return str(value)
    return f"{value / column.scale:.{column.digits}f}"


def write_rounds_csv(out: IO[str], rounds: list[dict]) -> None:
    """One header line of ``ROUND_FIELDS`` names, then one line per round (empty for null)."""
    writer = csv.DictWriter(out, fieldnames=list(ROUND_FIELDS))
    writer.writeheader()
    writer.writerows(rounds)


def rounds_csv_response(experiment, *, public: bool = False) -> HttpResponse:
    """The rounds CSV download: the page's and the API's are this same response."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}-rounds.csv"'
    write_rounds_csv(response, rounds_of(experiment, public=public))
    return response
