"""The ingest_live benchmark end to end, small: 5 external runs logging through fedweb_client to a
real daphne, one dashboard socket open on each. Checks what reaches the sockets (every round once,
in order), never its timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_every_logged_round_reaches_its_dashboard_once_and_in_order(tmp_path, redis_url):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FEDWEB_BENCH_RESULTS": str(tmp_path), "FEDWEB_INGEST_ROUNDS": "30"}
    env["REDIS_URL"] = redis_url  # the machine's, or the embedded one the fixture started
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "ingest_live", "--size", "small"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    row = json.loads((tmp_path / "ingest_live-small-cpu.json").read_text())["rows"][0]
    assert (row["runs"], row["rounds_per_run"], row["metrics_per_round"]) == (5, 30, 10)
    assert (row["missed"], row["duplicated"], row["out_of_order"], row["errors"]) == (0, 0, 0, [])
    assert row["deliveries"] == 5 * 30 and row["finished"] == 5 and row["p99_ms"] is not None
