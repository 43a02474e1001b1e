"""The engine alone, over ranks that are real processes: ``python -m fedweb_engine run`` with
``compute.ranks: 2`` starts its member rank as a child and prints the round lines the one-rank run
prints (within 1e-5); a member killed mid-run ends the run with an error naming it, promptly, and
leaves no process behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.conftest import TINY_SPEC

ROOT = Path(__file__).resolve().parents[2]
SPEC = {
    **TINY_SPEC, "rounds": 4, "participation": {"clients_per_round": 6},
    "algorithm": {"client": {"name": "scaffold"}}, "compute": {"device": "cpu", "client_group_size": 2},
}  # fmt: skip
COMPARED = ("train_loss", "test_loss", "test_accuracy", "update_norm", "samples", "bytes_up", "bytes_down", "completed")


def _run(tmp_path: Path, ranks: int, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    path = tmp_path / f"spec-{ranks}.json"
    path.write_text(json.dumps({**SPEC, "compute": {**SPEC["compute"], "ranks": ranks}}))
    return subprocess.run(
        [sys.executable, "-m", "fedweb_engine", "run", str(path), "--quiet"], cwd=ROOT, capture_output=True,
        text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )  # fmt: skip


@pytest.mark.slow
def test_two_ranks_print_the_round_lines_of_one(tmp_path):
    one, two = _run(tmp_path, 1), _run(tmp_path, 2)
    assert one.returncode == 0, one.stderr[-2000:]
    assert two.returncode == 0, two.stderr[-2000:]
    a = [json.loads(line) for line in one.stdout.splitlines()]
    b = [json.loads(line) for line in two.stdout.splitlines()]
    assert [r["round"] for r in b] == [1, 2, 3, 4]
    for x, y in zip(a, b, strict=True):
        assert set(x) == set(y)  # the same record, key for key
        for key in COMPARED:
            assert y[key] == pytest.approx(x[key], abs=1e-5, rel=0), (x["round"], key)
        assert y["ranks"] == 2 and x["ranks"] is None
        assert len(y["rank_devices"]) == 2 and len(y["rank_train_seconds"]) == 2
    assert "2 ranks (gloo) formed in" in two.stderr


@pytest.mark.slow
def test_a_member_killed_mid_run_ends_the_run_at_once_and_leaves_nothing(tmp_path):
    mark = f"fedweb-test-{tmp_path.name}"  # this run's members inherit it (another test's may run meanwhile)
    run = _run(tmp_path, 2, env={"FEDWEB_RANK_CRASH_AT": "1:3", "FEDWEB_TEST_MARK": mark}, timeout=120)
    assert run.returncode == 3
    assert "error: the run stopped: rank 0 of 2" in run.stderr
    assert "rank 1 exited" in run.stderr  # which one went, not only that one did
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["round"] for r in lines] == [1, 2]  # round 3 never completed, and nothing says it did
    assert left_behind(mark) == []


def left_behind(mark: str) -> list[psutil.Process]:
    """Member processes still alive that carry ``mark`` in their environment."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if (
                "fedweb_engine.distributed.member" in " ".join(p.info["cmdline"] or [])
                and p.environ().get("FEDWEB_TEST_MARK") == mark
            ):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
