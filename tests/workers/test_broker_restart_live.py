"""Redis (the broker and the channel layer) restarts empty in the middle of a run, as in a redeploy:
a real Celery worker, the test's own redis-server SIGKILLed and started again on its port. Nothing
is lost (every round recorded once), and the run resumes within 10 s of Redis's return, not after
the resend timeouts: measured from the run's own records (the claim of its next round)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from orchestrator.models import Experiment, LogEntry, RoundMetric
from tests import live
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROUNDS = 12
RESUME_WITHIN = 10.0  # seconds after Redis is back


@pytest.fixture
def private_redis(tmp_path):
    server = live.EmbeddedRedis(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture
def redis_url(private_redis):
    """This test's broker is its own: killing the shared one would stop every other test's."""
    return private_redis.url


def _state(pk: int) -> dict:
    e = Experiment.objects.get(pk=pk)
    return {"status": e.status, "claimed": e.claimed_round, "current": e.current_round, "sent": e.dispatched_round}


def test_a_run_resumes_within_seconds_of_an_empty_broker_coming_back(workers, private_redis, user):
    # The resend timeouts at their defaults: a lost message would wait a minute for them.
    worker = workers.start("w1", env={"WORKER_LOST_AFTER": "60", "ROUND_RESEND_AFTER": "300"})
    e = new_experiment(owner=user, name="through a redeploy", spec={**TINY_SPEC, "rounds": ROUNDS})
    e.start()
    live.wait_for(lambda: _state(e.pk)["current"] >= 3, 120, "round 3", observe=lambda: _state(e.pk))

    private_redis.kill()
    # The round in flight is recorded (the database does not need Redis); its successor is recorded as
    # sent, but the send gives up (the worker says so): its message is lost, as one Redis held would be.
    live.wait_for(lambda: "could not send round" in worker.log_path.read_text(errors="replace"), 60,
                  "the worker to give up a send", observe=lambda: _state(e.pk))  # fmt: skip
    stalled = _state(e.pk)
    assert stalled["sent"] > stalled["current"] >= stalled["claimed"], stalled  # nothing runs, one round is sent
    private_redis.start()  # empty: no persistence
    back = timezone.now()

    live.wait_for(
        lambda: _state(e.pk)["status"] == "completed", 180, "the run to complete", observe=lambda: _state(e.pk)
    )
    resumed = RoundMetric.objects.get(experiment=e, round=stalled["current"] + 1).claimed
    assert list(RoundMetric.objects.filter(experiment=e).order_by("round").values_list("round", flat=True)) == list(
        range(1, ROUNDS + 1)
    )
    waited = (resumed - back).total_seconds()
    print(f"round {stalled['current'] + 1} was claimed {waited:.2f} s after Redis came back")
    assert waited <= RESUME_WITHIN, waited
    said = LogEntry.objects.filter(experiment=e, message__contains="lost with the broker")
    assert said.exists(), list(LogEntry.objects.filter(experiment=e).values_list("message", flat=True))
    print(
        f"sent again {(said.first().time - back).total_seconds():.2f} s after Redis came back: {said.first().message}"
    )
