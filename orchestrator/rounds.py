"""An experiment's rounds as the pages, the API and the report show them: the list of result
dicts, the rounds table and the CSV file. Every one reads the engine's ``ROUND_RESULT_FIELDS``."""

from __future__ import annotations

import csv
from typing import IO, NamedTuple

from django.http import HttpResponse

from workers.engine.result import ROUND_RESULT_FIELDS

MB = 1e6


class Column(NamedTuple):
    """A column of the rounds table: a RoundResult field, its heading, and how it is shown."""

    field: str
    label: str
    digits: int | None = None  # decimals; None shows the value as it is
    scale: float = 1.0  # the value is divided by this (bytes -> MB)


# The rounds table shows these RoundResult fields, in this order; the page's script reads the same
# list (page data ``table_columns``) to add the rows that arrive live.
TABLE_COLUMNS = (
    Column("round", "Round"),
    Column("participants", "Clients"),
    Column("completed", "Done"),
    Column("train_loss", "Train loss", 4),
    Column("test_loss", "Test loss", 4),
    Column("test_accuracy", "Accuracy", 4),
    Column("bytes_up", "Up MB", 2, MB),
    Column("bytes_down", "Down MB", 2, MB),
    Column("round_seconds", "Seconds", 2),
    Column("rss_mb", "RSS MB", 0),
    Column("vram_peak_mb", "VRAM peak MB", 0),
)
_unknown = [c.field for c in TABLE_COLUMNS if c.field not in ROUND_RESULT_FIELDS]
if _unknown:  # fail at import, not on a page: the engine renamed or dropped a field
    raise ImportError(f"rounds table columns not in ROUND_RESULT_FIELDS: {_unknown}")


def rounds_of(experiment) -> list[dict]:
    """Every recorded round of ``experiment``, oldest first, as RoundResult dicts."""
    return [row.to_result_dict() for row in experiment.rounds.order_by("round")]


def table_rows(rounds: list[dict]) -> list[list[str]]:
    """The rounds table's cells, newest round first, formatted as ``TABLE_COLUMNS`` says."""
    return [[_cell(r[c.field], c) for c in TABLE_COLUMNS] for r in reversed(rounds)]


def table_columns() -> list[dict]:
    """``TABLE_COLUMNS`` as JSON for the page's script."""
    return [c._asdict() for c in TABLE_COLUMNS]


def _cell(value, column: Column) -> str:
    if value is None:
        return "–"
    if column.digits is None:
        return str(value)
    return f"{value / column.scale:.{column.digits}f}"


def write_rounds_csv(out: IO[str], rounds: list[dict]) -> None:
    """One header line of RoundResult field names, then one line per round (empty for null)."""
    writer = csv.DictWriter(out, fieldnames=list(ROUND_RESULT_FIELDS))
    writer.writeheader()
    writer.writerows(rounds)


def rounds_csv_response(experiment) -> HttpResponse:
    """The rounds CSV download: the page's and the API's are this same response."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="experiment-{experiment.pk}-rounds.csv"'
    write_rounds_csv(response, rounds_of(experiment))
    return response
