"""A broker that restarted empty, noticed from its run id: the rounds sent before its start and
claimed by no process go again at once (not after the resend timeouts), each run says so in its
log, rounds sent after its start are left alone; and a worker retries a lost broker every second or
two instead of kombu's back-off to 30 s."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from orchestrator.fleet.scheduling import reconcile
from orchestrator.models import Experiment, LogEntry, Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from workers.broker import retry as broker_retry
from workers.broker import watch as broker_watch

pytestmark = pytest.mark.django_db


def _sent_before(user, name: str, sent_at, **fields) -> Experiment:
    """A running experiment whose round 3 was sent at ``sent_at`` (rounds 1-2 recorded)."""
    e = new_experiment(owner=user, name=name, spec=TINY_SPEC)
    e.start()
    Experiment.objects.filter(pk=e.pk).update(
        status="running", current_round=2, dispatched_round=3, dispatched_at=sent_at, **fields
    )
    return Experiment.objects.get(pk=e.pk)


def test_it_notices_a_new_run_id_and_says_since_when(monkeypatch, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    Worker.objects.create(hostname="w1@box", queue="cpu")
    started = timezone.now() - timedelta(seconds=4)
    identity = {"now": ("run-a", started - timedelta(hours=1))}
    monkeypatch.setattr(broker_watch, "broker_identity", lambda: identity["now"])

    assert broker_watch.restarted_since("w1@box") is None  # first sight: nothing to compare with
    assert broker_watch.restarted_since("w1@box") is None  # the same Redis
    identity["now"] = ("run-b", started)
    assert broker_watch.restarted_since("w1@box") == started
    assert Worker.objects.get(hostname="w1@box").broker_run_id == "run-b"
    identity["now"] = None  # away again: no verdict
    assert broker_watch.restarted_since("w1@box") is None


def test_a_worker_started_with_the_new_redis_notices_from_the_others_rows(monkeypatch):
    Worker.objects.create(hostname="old@box", queue="cpu", broker_run_id="run-a")  # gone with the redeploy
    Worker.objects.create(hostname="new@box", queue="cpu")
    started = timezone.now()
    monkeypatch.setattr(broker_watch, "broker_identity", lambda: ("run-b", started))

    assert broker_watch.restarted_since("new@box") == started


def test_rounds_sent_before_the_restart_go_again_at_once_and_the_run_says_why(user, enqueued, settings):
    settings.WORKER_LOST_AFTER, settings.ROUND_RESEND_AFTER = 60, 300  # the timeouts would wait this long
    settings.FEDWEB_AFFINITY_GRACE = 5
    Worker.objects.create(hostname="w1@box", queue="cpu", slots=4)
    started = timezone.now() - timedelta(seconds=2)
    # w1 recorded its round 2 a moment ago, and its own pass sent round 3 into the Redis that died: the
    # grace that keeps a fresh round for its holder's own pass must not hold it back now.
    lost = _sent_before(user, "lost", started - timedelta(seconds=1), worker="w1@box", claimed_round=2,
                        ready_since=started - timedelta(seconds=1.5))  # fmt: skip
    after = _sent_before(user, "sent after the restart", started + timedelta(seconds=1))
    running = _sent_before(user, "running", started - timedelta(seconds=1), claimed_round=3, worker="w1@box",
                           lease_expires=timezone.now() + timedelta(seconds=60))  # fmt: skip
    enqueued.clear()
    now = timezone.now()  # the order that matters, close to now: ready, sent, the broker's restart
    started = now - timedelta(seconds=0.5)
    Experiment.objects.filter(pk=lost.pk).update(
        ready_since=now - timedelta(seconds=1), dispatched_at=now - timedelta(seconds=0.8)
    )
    Experiment.objects.filter(pk=after.pk).update(dispatched_at=now - timedelta(seconds=0.2))

    assert reconcile() == []  # without the restart noticed, all three look fine for another minute
    sent = reconcile(broker_since=started)

    assert sent == [(lost.pk, 3)] and [args for args, _ in enqueued] == [(lost.pk, 3)]
    said = list(LogEntry.objects.filter(experiment=lost, level="warning").values_list("message", flat=True))
    assert len(said) == 1 and "Round 3 was lost with the broker, which restarted empty at" in said[0]
    assert said[0].endswith("; sent it again")
    assert not LogEntry.objects.filter(experiment__in=[after, running], level="warning").exists()
    assert reconcile(broker_since=started) == []  # sent anew after the start: not again


def test_a_worker_retries_a_lost_broker_every_second_or_two(monkeypatch):
    asked = {}

    class Conn:
        def ensure_connection(self, *args, **kwargs):
            asked.update(kwargs)
            return self

    consumer = SimpleNamespace(
        app=SimpleNamespace(
            conf=SimpleNamespace(
                broker_connection_retry_on_startup=True,
                broker_connection_retry=True,
                broker_connection_max_retries=None,
            )
        ),  # fmt: skip
        first_connection_attempt=False,
        broker_connection_retry_attempt=0,
    )
    monkeypatch.setattr(broker_retry.Consumer, "ensure_connected", broker_retry.Consumer.ensure_connected)
    broker_retry.install()

    broker_retry.Consumer.ensure_connected(consumer, Conn())

    assert (asked["interval_start"], asked["interval_max"]) == (1.0, 2.0)  # kombu's default: 2 s growing to 30 s
