"""scheduling --real reads its switch columns from the runs' logs and its times from the database."""

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks.sched_real_metrics import read_back
from orchestrator.experiments.models import Experiment
from tests.factories import new_experiment
from tests.fleet.test_schedule import _measured

pytestmark = pytest.mark.django_db


def test_it_counts_switches_their_seconds_and_replayed_rounds_from_the_logs(user, other_user):
    t0 = timezone.now() - timedelta(seconds=100)
    made = []
    for owner, name in ((user, "a"), (other_user, "b")):
        e = new_experiment(owner=owner, name=name, spec={"rounds": 2})
        Experiment.objects.filter(pk=e.pk).update(
            status="completed", queued_at=t0, finished=t0 + timedelta(seconds=10 if name == "a" else 30)
        )
        made.append(e)
    a, b = made
    a.log("info", "Round 1 on w1@h: built the simulation in 0.40 s (data built)")
    a.log("info", "Round 2 on w2@h: loaded the state of round 1 in 0.25 s (data cached)")
    b.log("info", "Round 3 on w1@h: loaded the state of round 2 in 0.50 s (data built)")
    b.log("warning", "Round 5 on w2@h: no readable state of round 4; replaying rounds 3..4 from the checkpoint")
    for e in (a, b):
        _measured(e, 1, 2.0, 100.0)
    got = read_back([a.pk, b.pk], workers=2)
    assert (got["switches"], got["rebuilds"], got["replayed_rounds"]) == (2, 1, 2)
    assert got["switch_seconds"] == pytest.approx(0.75)
    assert got["mean_completion_s"] == pytest.approx(20.0, abs=0.01)
    assert got["makespan_s"] == pytest.approx(30.0, abs=0.01)
    assert got["utilisation"] == pytest.approx(4.0 / (2 * 30.0), rel=0.01)
    assert 0 < got["jain_user"] <= 1 and 0 < got["jain_team"] <= 1
