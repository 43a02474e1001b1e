"""``make run``'s live demo never holds the worker a user needs: with the demo running on the only
worker, a user's first round is claimed before the demo's next one, whatever round the demo is on.
A real Celery worker and a real Redis; the order is read from the rounds' own claim records."""

from __future__ import annotations

import pytest

from orchestrator.experiments.launch import checked_spec, create_experiment
from orchestrator.management.commands.demo import queue_live_demo
from orchestrator.models import Experiment, RoundMetric
from tests import live
from tests.conftest import TINY_SPEC

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _round(experiment: Experiment, number: int) -> RoundMetric | None:
    return RoundMetric.objects.filter(experiment=experiment, round=number).first()


def _progress(*experiments: Experiment) -> dict:
    rows = Experiment.objects.filter(pk__in=[e.pk for e in experiments])
    return {e.name: (e.status, e.claimed_round, e.current_round, e.dispatched_round) for e in rows}


def test_a_users_first_round_is_claimed_before_the_demos_next(workers, user, django_user_model):
    workers.start("w1")
    demo = queue_live_demo(django_user_model.objects.create_user("demo", password="demo"))
    live.wait_for(lambda: _round(demo, 2), 180, "the demo's second round", observe=lambda: _progress(demo))

    mine = create_experiment(owner=user, name="my first", spec=checked_spec({**TINY_SPEC, "rounds": 2}))
    demo.refresh_from_db()
    demo_next = demo.dispatched_round + 1  # the one after the demo round already sent or running

    first = live.wait_for(lambda: _round(mine, 1), 60, "my first round", observe=lambda: _progress(demo, mine))
    after = live.wait_for(
        lambda: _round(demo, demo_next), 60, f"demo round {demo_next}", observe=lambda: _progress(demo)
    )
    assert first.claimed < after.claimed, (first.claimed, after.claimed)
    # And the demo carried on: it only yields, and the user's run completes too.
    live.wait_for(lambda: Experiment.objects.get(pk=mine.pk).status == "completed", 60, "my run to complete")
    waited = (first.claimed - Experiment.objects.get(pk=mine.pk).queued_at).total_seconds()
    print(f"my first round was claimed {waited:.1f} s after it was queued, demo round {demo_next} after it")
