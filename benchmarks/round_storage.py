"""A round's fields as columns, or as one JSON column beside a few indexed scalars
(``python -m benchmarks.round_storage``).

Every field declared in ``fedweb_engine/results/round_fields.py`` is a ``RoundMetric`` column, so a new
field costs a migration. The alternative keeps the scalars the list's SQL summaries read as
columns and the whole result in one JSON column, so a new field costs none. This measures what
each costs on SQLite (the default database), 200 experiments × 500 rounds:

* ``list_summaries_s``: the experiments list's summaries (count, max, sum, the last evaluated
  round's values) for every experiment: the same SQL on both, over columns both have;
* ``dashboard_read_s``: one experiment's 500 rounds read as ``RoundResult`` dicts (the dashboard,
  the API, the CSV);
* ``other_field_max_s``: a summary of a field that is not one of the indexed scalars (the max
  VRAM peak of every experiment): a column against ``json_extract``;
* ``write_s``: recording one experiment's 500 rounds.

Each is the median of 5 runs, the two layouts in turns; ``ratio`` is JSON ÷ columns (above 1: the JSON layout is slower).
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import results_dir, stamp
from fedweb_engine.results.round_fields import FIELDS

EXPERIMENTS, ROUNDS, REPEATS = 200, 500, 5
# The scalars the list's summaries read (orchestrator/experiments/summaries.py): the JSON layout keeps them as columns.
SCALARS = ("test_accuracy", "test_loss", "round_seconds", "bytes_up", "bytes_down", "dp_epsilon")
NAMES = [f.name for f in FIELDS if f.name != "round"]


def _result(n: int) -> dict:
    values = {f.name: (None if f.null else 0) for f in FIELDS}
    values.update(round=n, participants=10, completed=10, train_loss=2.0 / n, test_loss=2.1 / n,
                  test_accuracy=min(0.99, n / ROUNDS), bytes_down=40_000, bytes_up=40_000, bytes_formula=320_000,
                  round_seconds=0.5, train_seconds=0.4, samples=1000, rss_mb=500.0 + n % 7, threads=4,
                  vram_peak_mb=900.0 + n % 11, device="cuda:0", participation_histogram=[n % 20] * 20)  # fmt: skip
    if n % 5:
        values.update(test_accuracy=None, test_loss=None)  # evaluated every 5th round
    return values


def _schema(db: sqlite3.Connection) -> None:
    columns = ", ".join(f'"{n}"' for n in NAMES)
    db.execute(f"CREATE TABLE cols (id INTEGER PRIMARY KEY, experiment_id INT, round INT, {columns})")
    db.execute(
        f"CREATE TABLE js (id INTEGER PRIMARY KEY, experiment_id INT, round INT, {', '.join(SCALARS)}, data TEXT)"
    )
    for table in ("cols", "js"):
        db.execute(f"CREATE UNIQUE INDEX {table}_er ON {table} (experiment_id, round)")


def _write(db: sqlite3.Connection, table: str, experiment: int) -> None:
    rows = [_result(n) for n in range(1, ROUNDS + 1)]
    if table == "cols":
        marks = ", ".join("?" * (len(NAMES) + 2))
        values = [(experiment, r["round"], *(_sql(r[n]) for n in NAMES)) for r in rows]
        db.executemany(f"INSERT INTO cols (experiment_id, round, {', '.join(NAMES)}) VALUES ({marks})", values)
    else:
        marks = ", ".join("?" * (len(SCALARS) + 3))
        values = [(experiment, r["round"], *(r[s] for s in SCALARS), json.dumps(r)) for r in rows]
        db.executemany(f"INSERT INTO js (experiment_id, round, {', '.join(SCALARS)}, data) VALUES ({marks})", values)
    db.commit()


def _sql(value):
    return json.dumps(value) if isinstance(value, list) else value


def _summaries(db: sqlite3.Connection, table: str) -> list:
    # summaries_for's query: aggregates plus the last evaluated round's accuracy and loss per experiment.
    last = f"(SELECT {{}} FROM {table} i WHERE i.experiment_id = o.experiment_id AND i.test_accuracy IS NOT NULL ORDER BY i.round DESC LIMIT 1)"  # noqa: E501
    sql = (
        f"SELECT experiment_id, COUNT(id), MAX(test_accuracy), SUM(round_seconds), SUM(bytes_up + bytes_down), "
        f"{last.format('test_accuracy')}, {last.format('test_loss')} FROM {table} o GROUP BY experiment_id"
    )
    return db.execute(sql).fetchall()


def _dashboard(db: sqlite3.Connection, table: str) -> list[dict]:
    if table == "cols":
        cursor = db.execute(f"SELECT round, {', '.join(NAMES)} FROM cols WHERE experiment_id = 7 ORDER BY round")
        names = ["round", *NAMES]
        return [{n: (json.loads(v) if n == "participation_histogram" and v else v) for n, v in zip(names, row, strict=True)}
                for row in cursor]  # fmt: skip
    return [json.loads(d) for (d,) in db.execute("SELECT data FROM js WHERE experiment_id = 7 ORDER BY round")]


def _other_field(db: sqlite3.Connection, table: str) -> list:
    value = "vram_peak_mb" if table == "cols" else "json_extract(data, '$.vram_peak_mb')"
    return db.execute(f"SELECT experiment_id, MAX({value}) FROM {table} GROUP BY experiment_id").fetchall()


def _medians(fn: Callable[[str], object]) -> tuple[float, float]:
    """Median seconds of ``fn("cols")`` and ``fn("js")``, run in turns so that a load that comes and
    goes on a shared machine falls on both alike."""
    times: dict[str, list[float]] = {"cols": [], "js": []}
    for _ in range(REPEATS):
        for table in times:
            t0 = time.perf_counter()
            fn(table)
            times[table].append(time.perf_counter() - t0)
    return statistics.median(times["cols"]), statistics.median(times["js"])


def measure(folder: Path) -> dict:
    db = sqlite3.connect(folder / "rounds.sqlite3")
    _schema(db)
    for table in ("cols", "js"):
        for e in range(EXPERIMENTS):
            _write(db, table, e)
    assert _summaries(db, "cols") == _summaries(db, "js")  # the same answers, or the timing means nothing
    assert _dashboard(db, "cols") == _dashboard(db, "js")
    out = {}
    counter = iter(range(10**6, 10**7))
    work = {
        "list_summaries_s": lambda t: _summaries(db, t),
        "dashboard_read_s": lambda t: _dashboard(db, t),
        "other_field_max_s": lambda t: _other_field(db, t),
        "write_s": lambda t: _write(db, t, next(counter)),
    }
    for name, fn in work.items():
        cols, js = _medians(fn)
        out[name] = {"columns": cols, "json": js, "ratio": js / cols}
    out["bytes"] = (folder / "rounds.sqlite3").stat().st_size
    return out


def main() -> Path:
    with tempfile.TemporaryDirectory(dir=os.environ.get("FEDWEB_DATA_DIR")) as tmp:
        figures = measure(Path(tmp))
    record = {
        "benchmark": "round_storage",
        **stamp("python -m benchmarks.round_storage"),
        "sqlite": sqlite3.sqlite_version,
        "experiments": EXPERIMENTS,
        "rounds_each": ROUNDS,
        "repeats": REPEATS,
        "indexed_scalars": list(SCALARS),
        # Shared by several sessions' tests: the absolute times are loaded; the ratios come from one run.
        "load_average": list(os.getloadavg()),
        **figures,
    }
    path = results_dir() / "round_storage.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


if __name__ == "__main__":
    print(main(), file=sys.stderr)
