"""benchmarks/client_state.py measures what it says on a tiny workload (correctness only, no timings)."""

import pytest

from benchmarks import client_state
from benchmarks.common import Options


@pytest.mark.slow  # six child processes, each importing torch
def test_it_reports_rss_time_and_disk_per_contender_and_population(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDWEB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(client_state, "WIDTH", 1000)
    monkeypatch.setattr(client_state, "POPULATIONS", (50, 200))
    monkeypatch.setattr(client_state, "SIZES", {"small": {"rounds": 4, "cohort": 10, "group": 4}})
    record = client_state.run(Options(size="small", device="cpu"))
    rows = {(r["contender"], r["num_clients"]): r for r in record["results"]}
    assert set(rows) == {(c, n) for c in client_state.CONTENDERS for n in (50, 200)}
    for row in rows.values():
        assert len(row["rss_mb"]) == len(row["round_s"]) == 4 and row["peak_rss_mb"] > 0
    assert 10 * 4000 <= rows[("store", 200)]["disk_bytes"] < 200 * 4000  # clients seen, not the population
    assert set(record["ratios"]) == {"50", "200"}
    assert [p.name for p in tmp_path.iterdir()] == []  # its files are gone
