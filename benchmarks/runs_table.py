"""``python -m benchmarks runs_table``: the runs table at scale, on SQLite and on PostgreSQL.

For each database a child process migrates a fresh one (a temp SQLite file; a new database on the
PostgreSQL server at ``$FEDWEB_BENCH_DATABASE_URL``, else postgres://postgres@127.0.0.1:5432/postgres
when it answers, dropped afterwards), generates ``--size full``: 10,000 runs x 1,000 rounds (``small``:
300 x 40; ``runs_table_data.py``), then times in-process requests of the list page (the test
client: URL routing, middleware, the view, the template) for five representative queries, and the
API's first page, as a member of the team that holds ~90% of the runs. The record holds p50 and
p95 per query and database, each request's CPU time (the web process's and the database's: on a
shared machine the wall time also counts the waits for a core), the answer's size and rows, the load,
and whether p95 met the goal (300 ms).

``FEDWEB_RUNS_TABLE_KEEP=<folder>`` keeps both databases (the SQLite file in that folder, the
PostgreSQL database ``fedweb_runs_table_<size>``) and a note of what was generated: a later run with
the same folder measures them again without generating them (the data is seeded: the same each time).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import Options, machine

ROOT = Path(__file__).resolve().parent.parent
SIZES = {"small": (300, 40), "full": (10_000, 1_000)}
SIZE_ENV = "FEDWEB_RUNS_TABLE_SIZE"  # "RUNSxROUNDS" instead of the size's (tests, trials)
KEEP_ENV = "FEDWEB_RUNS_TABLE_KEEP"
REPEATS = {"small": 5, "full": 30}
GOAL_P95_MS = 300.0
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
# name -> the page's parameters: a researcher's everyday tables.
QUERIES: dict[str, dict[str, str]] = {
    "newest first (default columns)": {},
    "spec filter, sorted by a summary": {
        "q": "local.lr > 0.05 and algorithm.client.name = scaffold",
        "columns": "local.lr,algorithm.client.name,data.alpha,best_accuracy,mb,rounds_to_target", "sort": "-best_accuracy",
    },
    "summary + tag, sorted by rounds to target": {
        "q": "best_accuracy >= 0.85 and tag:baseline", "sort": "rounds_to_target",
        "columns": "algorithm.client.name,best_accuracy,rounds_to_target,seconds_to_target,mb_to_target",
    },
    "grouped by two columns": {
        "group": "algorithm.client.name,local.lr", "columns": "best_accuracy,final_loss,mb,rounds_to_target",
    },
    "date and status filter, page 20, sorted by a spec field": {
        "q": "created > 30d and status = completed and communication.uplink.name != fp32",
        "columns": "local.lr,communication.uplink.name,epsilon,mb_to_target", "sort": "local.lr", "page": "20",
    },
}  # fmt: skip
API = {"page_size": "50", "columns": "local.lr,best_accuracy,rounds_to_target"}


def _size(size: str) -> tuple[int, int]:
    if custom := os.environ.get(SIZE_ENV):
        runs, rounds = custom.lower().split("x")
        return int(runs), int(rounds)
    return SIZES[size]


def run(opts: Options) -> dict[str, Any]:
    experiments, rounds = _size(opts.size)
    databases = {}
    for kind in ("sqlite", "postgresql"):
        databases[kind] = _in_child(kind, opts.size)
        print(f"  {kind}: {json.dumps(_short(databases[kind]))}", file=sys.stderr, flush=True)
    measured = [d for d in databases.values() if "queries" in d]
    p95s = [q["p95_ms"] for d in measured for q in d["queries"].values()]
    return {
        "device": "cpu, in-process requests",
        "experiments": experiments,
        "rounds_per_experiment": rounds,
        "goal_p95_ms": GOAL_P95_MS,
        "goal_met": bool(p95s) and max(p95s) <= GOAL_P95_MS,
        "databases": databases,
        "machine": machine("cpu"),
        "anchor_summary": "; ".join(
            f"{k}: worst p95 {max(q['p95_ms'] for q in d['queries'].values()):.0f} ms"
            for k, d in databases.items()
            if "queries" in d
        ),  # fmt: skip
    }


def _short(record: dict) -> dict:
    if "queries" not in record:
        return record
    return {name: (q["p50_ms"], q["p95_ms"], q["cpu_p50_ms"]) for name, q in record["queries"].items()}


def _postgres_server() -> str | None:
    url = os.environ.get("FEDWEB_BENCH_DATABASE_URL") or DEFAULT_POSTGRES
    try:
        import psycopg

        with psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=3, autocommit=True):
            return url
    except Exception:
        return None


def _in_child(kind: str, size: str) -> dict:
    """Generate and measure one database in a child process (Django binds to one database per process)."""
    keep = Path(os.environ[KEEP_ENV]) if os.environ.get(KEEP_ENV) else None
    with tempfile.TemporaryDirectory(prefix="fedweb-runs-table-") as tmp:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        note = folder / f"runs_table-{size}-{kind}.json"  # what a kept database holds
        admin = name = None
        if kind == "sqlite":
            url = f"sqlite:///{folder}/runs_table-{size}.sqlite3"
        else:
            admin = _postgres_server()
            if admin is None:
                return {"skipped": "no PostgreSQL answers (set FEDWEB_BENCH_DATABASE_URL)"}
            name = f"fedweb_runs_table_{size}" if keep else f"fedweb_bench_{uuid.uuid4().hex[:8]}"
            if not (keep and note.exists()):
                _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                _admin(admin, f'CREATE DATABASE "{name}"')
            url = admin.rsplit("/", 1)[0] + "/" + name
        out = Path(tmp) / "record.json"
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "fedweb.settings", "PYTHONPATH": str(ROOT),
               "FEDWEB_DATA_DIR": tmp, "DEBUG": "0", "LOG_LEVEL": "WARNING"}  # fmt: skip
        args = ["--child", size, str(out), *(["--reuse", str(note)] if keep and note.exists() else [])]
        try:
            done = subprocess.run([sys.executable, "-m", "benchmarks.runs_table", *args], cwd=ROOT, env=env,
                                  timeout=4 * 3600)  # fmt: skip
            if done.returncode:
                return {"error": f"the child exited {done.returncode}"}
            record = json.loads(out.read_text())
            if keep and not note.exists():
                note.write_text(json.dumps({k: record[k] for k in GENERATED}))
            return record
        finally:
            if admin and not keep:
                _admin(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(url: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(sql)


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _database_cpu():
    """The CPU seconds of this connection's PostgreSQL backend so far (SQLite's run in this process)."""
    import psutil
    from django.db import connection

    if connection.vendor != "postgresql":
        return lambda: 0.0
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = psutil.Process(cursor.fetchone()[0])
    return lambda: sum(backend.cpu_times()[:2])


def _time(client, path: str, params: dict, repeats: int, database_cpu) -> dict:
    """Wall time of each request, and its CPU time (this process's and the database backend's): on a
    shared machine the wall time includes the waits for a core, the CPU time does not."""
    for _ in range(2):  # warm: the first request compiles templates and fills caches
        client.get(path, params)
    times, cpu, response = [], [], None
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time() + database_cpu()
        response = client.get(path, params)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() + database_cpu() - c0) * 1000)
        assert response.status_code == 200, (path, params, response.status_code, response.content[:300])
    body = response.content
    return {
        "p50_ms": round(statistics.median(times), 1), "p95_ms": round(_percentile(times, 0.95), 1),
        "max_ms": round(max(times), 1), "cpu_p50_ms": round(statistics.median(cpu), 1),
        "bytes": len(body), "rows": body.count(b"<tr data-id=") + body.count(b'class="group"'),
    }  # fmt: skip


GENERATED = ("reader", "experiments", "rounds", "target_steps", "generate_seconds")


def child(size: str, out: Path, reuse: Path | None = None) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from benchmarks.runs_table_data import generate

    settings.ALLOWED_HOSTS = ["*"]
    if reuse:  # a kept database, generated by an earlier run
        counts = {**json.loads(reuse.read_text()), "reused": True}
    else:
        call_command("migrate", verbosity=0)
        if connection.vendor == "sqlite":  # a throwaway file: no fsync while it is filled
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=OFF")
        counts = generate(*_size(size))
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")  # as autovacuum would after a load: the planner's statistics
    client = Client()
    client.force_login(get_user_model().objects.get(username=counts["reader"]))
    client.get("/")
    cpu = _database_cpu()
    load = os.getloadavg()[0]
    queries = {name: _time(client, "/", params, REPEATS[size], cpu) for name, params in QUERIES.items()}
    api = _time(client, "/api/experiments/", API, REPEATS[size], cpu)
    api["count"] = client.get("/api/experiments/", API).json()["count"]
    record = {"database": connection.vendor, **counts, "queries": queries, "api_first_page": api,
              "visible_runs": client.get("/api/experiments/", {"page_size": "1"}).json()["count"],
              "load_1min": [round(load, 2), round(os.getloadavg()[0], 2)]}  # fmt: skip
    out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "OUT"), required=True)
    parser.add_argument("--reuse", type=Path, help="a kept database's note: measure it without generating")
    args = parser.parse_args()
    child(args.child[0], Path(args.child[1]), args.reuse)
