"""Distributed rounds with real Celery workers: ranks that one worker spawns on its own devices, and a
gang of two workers; and the faults that matter (a rank killed mid-round, a gang member's whole worker
killed mid-round). Every round is recorded once, equal to the run alone (to float summation order), no
process waits past the collective timeout, and no slot stays reserved."""

from __future__ import annotations

import re

import psutil
import pytest

from orchestrator.experiments.models import Experiment, Status
from orchestrator.fleet.gangs import Gang
from orchestrator.fleet.workers import Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.live import wait_for
from tests.workers.reference import COMPARED, reference_simulation

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# A well-conditioned run (the mlp on 8x8 digits): the ranks change only the order of the update sums'
# float additions (~1e-8), which its training does not amplify. (A chaotic one would: the CNN at lr 0.05
# turns round 1's 7e-9 into 1e-2 by round 4, as a change of thread count would.) The faults are injected at
# a round's start on the member, so they land mid-round for the leader whatever a round takes.
SPEC = {
    **TINY_SPEC, "rounds": 6, "participation": {"clients_per_round": 6},
    "algorithm": {"client": {"name": "scaffold"}}, "compute": {"device": "cpu", "ranks": 2},
}  # fmt: skip
TIMEOUTS = {"FEDWEB_RANK_TIMEOUT": "30", "FEDWEB_RANK_JOIN_TIMEOUT": "60", "FEDWEB_GANG_IDLE": "20"}


def _finished(e: Experiment, timeout: float = 300) -> None:
    def done():
        e.refresh_from_db()
        return e.status in (Status.COMPLETED, Status.FAILED)

    wait_for(done, timeout, f"experiment {e.pk} to finish", interval=0.2)
    assert e.status == Status.COMPLETED, e.error


def _assert_equals_the_run_alone(e: Experiment) -> list[dict]:
    """Rounds 1..R recorded once each, each equal to the run alone within 1e-5."""
    rows = list(e.rounds.order_by("round").values("round", "ranks", "rank_devices", *COMPARED))
    assert [r["round"] for r in rows] == list(range(1, SPEC["rounds"] + 1))
    sim, expected = reference_simulation(SPEC)
    sim.close()
    for row, ref in zip(rows, expected, strict=True):
        for key in COMPARED:
            assert row[key] == pytest.approx(ref[key], abs=1e-5, rel=0), (row["round"], key)
    return rows


def _log(e: Experiment) -> list[str]:
    return list(e.log_entries.order_by("pk").values_list("message", flat=True))


def _waits_within_the_timeout(lines: list[str]) -> None:
    waits = [float(m.group(1)) for line in lines for m in re.finditer(r"failed after ([\d.]+) s", line)]
    assert waits and max(waits) < float(TIMEOUTS["FEDWEB_RANK_TIMEOUT"]), lines


def _members_left(env: dict) -> list[psutil.Process]:
    """This test's rank processes still alive: its workers' children carry its Redis key prefix."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if (
                "fedweb_engine.distributed.member" in " ".join(p.info["cmdline"] or [])
                and p.environ().get("FEDWEB_REDIS_PREFIX") == env["FEDWEB_REDIS_PREFIX"]
            ):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def _nothing_reserved() -> None:
    assert not Gang.objects.exists()
    assert list(Worker.objects.exclude(current_experiment=None).values_list("hostname", flat=True)) == []


def test_a_worker_runs_every_round_on_two_ranks_it_spawns_and_sets_them_up_once(user, workers, live_env):
    e = new_experiment(owner=user, name="two local ranks", spec=SPEC)
    workers.start("w1", env={"FEDWEB_WORKER_DEVICES": "cpu,cpu", **TIMEOUTS})
    e.start()
    _finished(e)
    rows = _assert_equals_the_run_alone(e)
    assert all(r["ranks"] == 2 and len(r["rank_devices"]) == 2 and "w1" in r["rank_devices"][1] for r in rows)
    formed = [line for line in _log(e) if "group formed in" in line]
    assert len(formed) == 1 and "this worker's devices" in formed[0]  # once per hold, not per round
    wait_for(lambda: not _members_left(live_env), 30, "the worker's rank processes to exit with the run")
    _nothing_reserved()


def test_two_workers_form_a_gang_that_runs_every_round(user, workers):
    workers.start_all("w1", "w2", env=TIMEOUTS)
    e = new_experiment(owner=user, name="a gang of two", spec=SPEC)
    e.start()
    _finished(e)
    rows = _assert_equals_the_run_alone(e)
    assert all(r["ranks"] == 2 for r in rows)
    hosts = {d.split()[0].split("@")[0] for r in rows for d in r["rank_devices"]}
    assert hosts == {"w1", "w2"}  # both workers ran ranks
    assert len([line for line in _log(e) if "group formed in" in line]) == 1
    wait_for(lambda: not Gang.objects.exists(), 30, "the gang to be dissolved")
    _nothing_reserved()


def test_a_rank_killed_mid_round_costs_that_round_a_new_group_and_nothing_else(user, workers, live_env, tmp_path):
    env = {"FEDWEB_WORKER_DEVICES": "cpu,cpu", "FEDWEB_RANK_CRASH_AT": "1:3",
           "FEDWEB_RANK_CRASH_ONCE": str(tmp_path / "crashed"), **TIMEOUTS}  # fmt: skip
    workers.start("w1", env=env)
    e = new_experiment(owner=user, name="a rank killed", spec=SPEC)
    e.start()
    _finished(e)
    assert (tmp_path / "crashed").exists()  # the member really died, in round 3
    rows = _assert_equals_the_run_alone(e)
    assert all(r["ranks"] == 2 for r in rows)  # round 3 again, on a new group of two
    lines = _log(e)
    aborted = [line for line in lines if "did not complete" in line]
    assert len(aborted) == 1 and aborted[0].startswith("Round 3 on 2 ranks") and "it is sent again" in aborted[0]
    assert "rank 1 exited" in aborted[0]
    _waits_within_the_timeout(aborted)
    assert len([line for line in lines if "group formed in" in line]) == 2  # the first hold, and the new one
    wait_for(lambda: not _members_left(live_env), 30, "the worker's rank processes to exit with the run")
    _nothing_reserved()


def test_a_gang_member_s_whole_worker_killed_mid_round_loses_nothing(user, workers):
    # Whichever worker serves as the member kills its whole process group (Celery and its pool, as a
    # crashed machine) as round 3 starts on its rank; the leader is in that round's collectives then.
    crash = {"FEDWEB_CRASH_AT": "rank-round:3", **TIMEOUTS}
    procs = workers.start_all("w1", "w2", env=crash)
    e = new_experiment(owner=user, name="a member's worker killed", spec=SPEC)
    e.start()
    wait_for(lambda: not all(p.alive() for p in procs.values()), 180, "the member's worker to die in round 3")
    dead = next(name for name, p in procs.items() if not p.alive())
    procs[dead].kill9()
    _finished(e)
    rows = _assert_equals_the_run_alone(e)
    assert [r["ranks"] for r in rows[:2]] == [2, 2]  # the gang ran rounds 1 and 2
    assert rows[2]["ranks"] is None  # round 3 again, on the leader alone: no other worker is idle
    aborted = [line for line in _log(e) if "did not complete" in line]
    assert len(aborted) == 1 and aborted[0].startswith("Round 3 on 2 ranks")
    _waits_within_the_timeout(aborted)
    assert all(p.alive() for name, p in procs.items() if name != dead)  # the leader lived on
    wait_for(lambda: not Gang.objects.exists(), 30, "the gang to be dissolved")
    Worker.objects.filter(hostname__startswith=f"{dead}@").update(current_experiment=None)  # a dead row, not a slot
    _nothing_reserved()
