"""The viewers benchmark end to end, small: a real daphne and Redis, a few public-link sockets,
rounds published faster than a page draws. Checks what it delivers, never its timings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_every_viewer_gets_every_round_once_and_the_record_says_so(tmp_path, redis_url):
    env = {
        **os.environ,
        "REDIS_URL": redis_url,  # the machine's, or the embedded one the fixture started
        "PYTHONPATH": str(ROOT),
        "FEDWEB_BENCH_RESULTS": str(tmp_path),
        "FEDWEB_VIEWERS": "3,6",
        "FEDWEB_VIEWER_ROUNDS": "30",
    }
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks", "viewers", "--size", "small"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / "viewers-small-cpu.json").read_text())

    assert [row["viewers"] for row in record["rows"]] == [3, 6]
    for row in record["rows"]:
        assert (row["missed"], row["duplicated"], row["errors"]) == (0, 0, [])
        assert row["deliveries"] == row["viewers"] * 30 and row["p99_ms"] is not None
