"""Disk retention (orchestrator/storage/disk_use.py): a run keeps at most FEDWEB_ROUND_STATES_KEEP
round states, a completed one only its final checkpoint, and ``manage.py disk --prune`` frees
exactly what it reports."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import Checkpoint, checkpoint_folder
from orchestrator.storage import disk_use as disk
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from workers.rounds import run_inline

pytestmark = pytest.mark.django_db

# SCAFFOLD keeps per-client state (client_state/ and a snapshot beside each checkpoint).
SCAFFOLD = {**TINY_SPEC, "rounds": 7, "algorithm": {"name": "fedavg", "client": {"name": "scaffold"}}}


@pytest.fixture(autouse=True)
def _checkpoints(settings, empty_round_cache):
    settings.CHECKPOINT_EVERY, settings.CHECKPOINT_KEEP = 2, 2


def _states(experiment_id: int) -> list[str]:
    return sorted(p.name for p in checkpoint_folder(experiment_id).glob("state-*.safetensors"))


@pytest.mark.parametrize("keep", [1, 3])
def test_a_run_of_n_rounds_with_retention_k_keeps_at_most_k_round_states(user, settings, keep):
    settings.FEDWEB_ROUND_STATES_KEEP = keep
    e = new_experiment(owner=user, name="kept", spec=SCAFFOLD)
    e.start(enqueue=False)
    seen = []

    run_inline(e, on_round=lambda metric: seen.append(_states(e.pk)))

    assert len(seen) == 7 and max(len(states) for states in seen) == keep
    assert seen[4] == [f"state-{r:06d}.safetensors" for r in range(6 - keep, 6)]  # after round 5: the newest
    # Completed: its final checkpoint holds the model; no round state, no live per-client state.
    e.refresh_from_db()
    assert e.status == Status.COMPLETED and _states(e.pk) == []
    assert list(Checkpoint.objects.filter(experiment=e).values_list("round", flat=True)) == [7]
    names = sorted(p.name for p in checkpoint_folder(e.pk).iterdir())
    assert names == ["round-000007.clients", "round-000007.safetensors"]
    used = disk.usage(e.pk)
    assert used.counts == {"checkpoints": 1, "states": 0} and used.client_state == 0 and used.total > 0


def _file(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * size)
    return path


def _checkpoint(e: Experiment, number: int, size: int = 1000) -> None:
    path = _file(checkpoint_folder(e.pk) / f"round-{number:06d}.safetensors", size)
    _file(checkpoint_folder(e.pk) / f"round-{number:06d}.clients" / "scaffold.c_i", size)
    Checkpoint.objects.create(experiment=e, round=number, path=str(path), size_bytes=size)


def _made(user, name: str, status: str, rounds: int) -> Experiment:
    e = new_experiment(owner=user, name=name, spec={**TINY_SPEC, "rounds": rounds})
    Experiment.objects.filter(pk=e.pk).update(status=status, current_round=rounds if status != "running" else 4)
    e.refresh_from_db()
    return e


def _tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_the_prune_command_frees_what_it_reports(user, settings):
    settings.FEDWEB_ROUND_STATES_KEEP, settings.CHECKPOINT_KEEP, settings.FEDWEB_FINISHED_CHECKPOINTS_KEEP = 2, 2, 1
    done = _made(user, "done before retention", "completed", 6)  # kept everything, as runs did before
    for n in (2, 4, 6):
        _checkpoint(done, n)
    for n in (5, 6):
        _file(checkpoint_folder(done.pk) / f"state-{n:06d}.safetensors", 700)
    _file(checkpoint_folder(done.pk) / "client_state" / "scaffold.c_i", 5000)
    _file(checkpoint_folder(done.pk) / ".state-000006.safetensors.123.tmp", 300)  # a killed writer's
    going = _made(user, "still running", "running", 10)
    for n in (1, 2, 3, 4):
        _checkpoint(going, n, 100)
        _file(checkpoint_folder(going.pk) / f"state-{n:06d}.safetensors", 70)
    _file(checkpoint_folder(going.pk) / "client_state" / "scaffold.c_i", 500)
    _file(checkpoint_folder(going.pk) / "round-000005.safetensors", 100)  # being written: its row comes next
    stopped = _made(user, "cancelled", "cancelled", 9)
    _checkpoint(stopped, 8, 100)
    for n in (8, 9):
        _file(checkpoint_folder(stopped.pk) / f"state-{n:06d}.safetensors", 70)
    _file(Path(settings.FEDWEB_DATA_DIR) / "checkpoints" / "99999" / "round-000001.safetensors", 4000)  # deleted run
    root = Path(settings.FEDWEB_DATA_DIR) / "checkpoints"
    before = _tree_bytes(root)

    report = StringIO()
    call_command("disk", "--prune", stdout=report)

    freed = int(re.search(r"Freed .* \(([\d,]+) bytes\)", report.getvalue()).group(1).replace(",", ""))
    assert freed == before - _tree_bytes(root) > 0
    assert sorted(p.name for p in checkpoint_folder(done.pk).iterdir()) == [
        "round-000006.clients",
        "round-000006.safetensors",
    ]
    assert _states(going.pk) == ["state-000003.safetensors", "state-000004.safetensors"]
    assert list(Checkpoint.objects.filter(experiment=going).values_list("round", flat=True).order_by("round")) == [3, 4]
    assert (checkpoint_folder(going.pk) / "client_state" / "scaffold.c_i").exists()  # its next round needs it
    assert (checkpoint_folder(going.pk) / "round-000005.safetensors").exists()
    assert _states(stopped.pk) == ["state-000009.safetensors"]  # newer than its last checkpoint: its last model
    assert not (root / "99999").exists()
    again = StringIO()
    call_command("disk", "--prune", stdout=again)
    assert "Freed 0 B (0 bytes)" in again.getvalue()


def test_the_report_lists_each_experiments_use_by_kind(user):
    e = _made(user, "big one", "completed", 2)
    _checkpoint(e, 2, 2_000_000)
    _file(checkpoint_folder(e.pk) / "client_state" / "scaffold.c_i", 3_000_000)

    out = StringIO()
    call_command("disk", stdout=out)

    line = next(row for row in out.getvalue().splitlines() if row.startswith(f"#{e.pk} big one"))
    assert "4.0 MB (1)" in line and "3.0 MB" in line and line.endswith("7.0 MB")
    assert (checkpoint_folder(e.pk) / "client_state").exists()  # a report deletes nothing


def test_the_dashboard_shows_the_runs_disk_use(user, client):
    e = _made(user, "on disk", "completed", 2)
    _checkpoint(e, 2, 2_000_000)
    client.force_login(user)

    html = client.get(f"/experiments/{e.pk}/").content.decode()

    assert (
        'id="disk-use"' in html
        and "On disk: <b>3.8\xa0MB</b>: checkpoints 3.8\xa0MB (1), round states 0\xa0bytes (0)" in html
    )
