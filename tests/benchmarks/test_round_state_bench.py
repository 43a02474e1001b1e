"""benchmarks/round_state.py measures what it says on a tiny workload (correctness only, no timings)."""

from benchmarks import round_state
from benchmarks.common import Options

TINY = {
    "rounds": 3,
    "data": {"dataset": "digits", "num_clients": 20, "image_size": 8},
    "model": {"name": "mlp", "hidden": 16},
    "participation": {"clients_per_round": 4},
}


def test_it_reports_write_load_and_bytes_per_model(monkeypatch, tmp_path):
    monkeypatch.setenv("FEDWEB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(round_state, "WORKLOADS", {"mlp": TINY})
    record = round_state.run(Options(size="small", device="cpu"))
    (row,) = record["models"]
    assert row["model"] == "mlp" and row["repeats"] >= 3
    assert row["bytes"] > 4 * row["num_params"]  # the global model alone is 4 bytes a parameter
    assert all(row[k] > 0 for k in ("round_s", "write_fsync_s", "write_s", "load_s", "switch_s"))
    assert list(tmp_path.iterdir()) == []  # its files are gone
