"""The runs_table benchmark end to end, tiny: both databases generated and measured (PostgreSQL when
one answers), every query answered with rows. Checks what it records, never its timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.runs_table import QUERIES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow]


def test_it_generates_both_databases_and_times_every_query(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "FEDWEB_BENCH_RESULTS": str(tmp_path),
        "FEDWEB_RUNS_TABLE_SIZE": "60x12",
    }
    env.pop("DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-m", "benchmarks", "runs_table", "--size", "small"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "runs_table-small-cpu.json").read_text())
    assert (record["experiments"], record["rounds_per_experiment"]) == (60, 12)
    measured = {k: d for k, d in record["databases"].items() if "queries" in d}
    assert "sqlite" in measured and set(record["databases"]) == {"sqlite", "postgresql"}
    for kind, database in measured.items():
        assert database["database"] == kind and database["rounds"] == 60 * 12 and 0 < database["visible_runs"] < 60
        assert set(database["queries"]) == set(QUERIES)
        for name, timing in database["queries"].items():
            assert 0 < timing["p50_ms"] <= timing["p95_ms"] <= timing["max_ms"] and timing["cpu_p50_ms"] > 0, name
            if "page" not in QUERIES[name]:  # a tiny table has no page 20
                assert timing["rows"] > 0, name  # every query finds runs in the generated data
        assert database["api_first_page"]["count"] == database["visible_runs"] and len(database["load_1min"]) == 2
