"""The scheduling simulation decides as production does (issue 17): one database state, scheduled by the
real ``schedule()`` (sends captured), and the same state fed to the simulation's dispatcher
(``sched_sim._Fleet.dispatch``), pick the same rounds for the same workers under every policy."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks.sched_sim import SCALES, Job, _Fleet, _Running
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.candidates import share_key
from orchestrator.fleet.policies import POLICIES
from orchestrator.fleet.scheduling import schedule
from orchestrator.fleet.workers import Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment

pytestmark = pytest.mark.django_db

HOSTS = ["w1@h", "w2@h", "w3@h"]
BY = "w2@h"  # the worker that just recorded a round and schedules (it holds a and e)
CAPACITY_MB = 1000.0
# name: (rounds done, mean round seconds, peak MB, last worker, running on (claimed), priority, owner)
WORLD = {
    "a": (1, 4.0, 300.0, "w2@h", "", 0, "user"),
    "b": (1, 2.0, 350.0, "w1@h", "w1@h", 0, "user"),  # its round 2 runs on w1 now
    "c": (0, None, None, "", "", 1, "other"),  # new: its first round is the probe
    "d": (2, 1.0, 400.0, "w3@h", "", 0, "other"),
    "e": (3, 0.5, 200.0, "w2@h", "", 2, "user"),
}
ROUNDS = 10


def _world(users: dict, policy: str, settings) -> tuple[dict[str, Experiment], float]:
    settings.FEDWEB_POLICY = {"cpu": policy}
    settings.FEDWEB_PACK_CAPACITY_MB = int(CAPACITY_MB)
    slots = 2 if policy == "pack" else 1
    for host in HOSTS:
        Worker.objects.create(hostname=host, queue="cpu", slots=slots)
    now = timezone.now()
    made = {}
    for i, (name, (done, seconds, peak, last, running, priority, owner)) in enumerate(WORLD.items()):
        e = new_experiment(owner=users[owner], name=name, spec={**TINY_SPEC, "rounds": ROUNDS})
        Experiment.objects.filter(pk=e.pk).update(
            status="running" if done else "queued", queue="cpu", current_round=done, dispatched_round=done, claimed_round=done,
            worker=last, priority=priority, queued_at=now - timedelta(seconds=100 - i), ready_since=now - timedelta(seconds=5),
        )  # fmt: skip
        for n in range(1, done + 1):
            RoundMetric.objects.create(
                experiment=e, round=n, participants=4, completed=4, stragglers=0, dropped=0, bytes_down=0,
                bytes_up=0, bytes_formula=0, round_seconds=seconds, train_seconds=seconds, samples=1, rss_mb=peak,
                threads=1, device="cpu",
            )  # fmt: skip
        if running:
            e.refresh_from_db()
            assert e.claim(done + 1, running, 1)
        e.refresh_from_db()
        made[name] = e
    return made, now.timestamp()


def _simulated(made: dict[str, Experiment], policy: str, now: float) -> list[tuple[int, str]]:
    """The simulation's dispatcher, fed the same state, hand-built from WORLD (not read by production code)."""
    scale = replace(SCALES["small"], workers=len(HOSTS), capacity_mb=CAPACITY_MB)
    jobs = []
    for name, (_, _, peak, _, _, priority, _) in WORLD.items():
        e = made[name]
        jobs.append(
            Job(e.pk, f"user:{e.owner_id}", share_key(e.owner_id, None), priority, e.queued_at.timestamp(),
                (1.0,) * ROUNDS, peak or 100.0, 0.5)
        )  # fmt: skip
    measured = [WORLD[n][1] for n in WORLD if WORLD[n][1] is not None]
    fleet = _Fleet(jobs, policy, scale, probe=min(measured), hostnames=HOSTS)
    for name, (done, seconds, peak, last, running, _, _) in WORLD.items():
        pk = made[name].pk
        fleet.done[pk] = done
        fleet.measured[pk] = [seconds] * done
        if last:
            fleet.holder[pk] = last
        if running:
            fleet.by_name[running].running.append(_Running(pk, 1.0, now, peak))
        else:
            fleet.ready[pk] = fleet.candidate(fleet.jobs[pk], made[name].ready_since.timestamp())
        if done:
            key = share_key(made[name].owner_id, None)
            served = fleet.service.get(key, (0.0, now))[0]
            fleet.service[key] = (served + seconds * done, now)
    fleet.dispatch(now, by={BY})
    return [(experiment, to) for _, _, experiment, to in fleet.result.trace]


@pytest.mark.parametrize("policy", POLICIES)
def test_the_simulation_sends_the_same_rounds_to_the_same_workers_as_schedule(
    user, other_user, enqueued, settings, policy
):
    made, now = _world({"user": user, "other": other_user}, policy, settings)
    sent = schedule("cpu", by=BY)
    production = []
    for (experiment, round_number), (_, kw) in zip(sent, enqueued, strict=True):
        queue = getattr(kw["queue"], "name", kw["queue"])
        production.append((experiment, "" if queue == "cpu" else queue.removesuffix(".dq2")))
        e = Experiment.objects.get(pk=experiment)
        assert round_number == e.current_round + 1
    assert production  # the world leaves room: something is sent
    assert _simulated(made, policy, now) == production
