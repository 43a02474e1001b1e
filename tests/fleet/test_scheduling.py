"""Sending rounds: exactly one sender per round, and nothing lost when a worker dies at any point."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator.experiments.models import Experiment, Status
from orchestrator.fleet.scheduling import dispatch_round, reconcile, renew_leases
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from workers.rounds import execute_round

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_round_cache")]


@pytest.fixture
def experiment(user):
    e = new_experiment(owner=user, name="tiny", spec=TINY_SPEC)
    e.start()
    return e


def _sent(enqueued, experiment) -> list[int]:
    return [args[1] for args, _ in enqueued if args[0] == experiment.pk]


def _age(experiment, **fields) -> Experiment:
    Experiment.objects.filter(pk=experiment.pk).update(**fields)
    experiment.refresh_from_db()
    return experiment


def test_it_sends_each_round_once_unless_forced(experiment, enqueued):
    assert _sent(enqueued, experiment) == [1]
    assert not dispatch_round(experiment, 1)  # already sent
    assert dispatch_round(experiment, 1, force=True)  # resume: an earlier copy may be lost
    assert not dispatch_round(experiment, 2)  # not the next round yet
    assert _sent(enqueued, experiment) == [1, 1]
    experiment.refresh_from_db()
    assert experiment.dispatched_round == 1 and experiment.dispatched_at is not None


def test_it_sends_the_next_round_from_a_redelivered_copy_when_the_worker_died_after_recording(experiment, enqueued):
    # The worker recorded round 1 and died before sending round 2 (as if killed right there).
    assert experiment.claim(1, "w1", 1) and experiment.advance(1)
    assert _sent(enqueued, experiment) == [1]
    assert execute_round(experiment.pk, 1, worker="w2") is None  # Celery redelivers round 1: no work ...
    assert _sent(enqueued, experiment) == [1, 2]  # ... but round 2 goes out
    assert execute_round(experiment.pk, 1, worker="w3") is None  # a third copy sends nothing more
    assert _sent(enqueued, experiment) == [1, 2]
    assert list(experiment.rounds.values_list("round", flat=True)) == []  # nothing trained twice


def test_it_runs_a_round_once_however_many_copies_arrive(experiment, enqueued):
    assert execute_round(experiment.pk, 1, worker="w1") is not None
    for worker in ("w2", "w3"):
        assert execute_round(experiment.pk, 1, worker=worker) is None
    assert list(experiment.rounds.values_list("round", flat=True)) == [1]
    assert _sent(enqueued, experiment) == [1, 2]


def test_it_sends_a_ready_round_in_the_next_heartbeat_when_its_worker_died_before_scheduling(experiment, enqueued):
    assert experiment.claim(1, "w1", 1) and experiment.advance(1)  # died before scheduling round 2
    assert reconcile() == [(experiment.pk, 2)]
    assert reconcile() == []  # sent now: not again
    assert _sent(enqueued, experiment) == [1, 2]
    assert not experiment.log_entries.filter(level="warning").exists()  # a ready round waits: nothing was lost


def test_it_leaves_a_round_alone_while_its_holder_renews_the_lease(experiment, enqueued, settings):
    assert experiment.claim(1, "w1@host", 4242)
    _age(experiment, lease_expires=timezone.now() + timedelta(seconds=1))
    assert renew_leases("w1@host", [4242]) == 1  # the heartbeat of the holder's parent
    experiment.refresh_from_db()
    assert experiment.lease_expires > timezone.now() + timedelta(seconds=settings.WORKER_LOST_AFTER - 5)
    assert renew_leases("w1@host", [1, 2]) == 0  # that process is gone: no renewal
    assert renew_leases("w2@host", [4242]) == 0  # another worker with a recycled pid: no renewal
    assert reconcile() == []
    assert _sent(enqueued, experiment) == [1]


def test_it_hands_back_the_round_of_a_dead_holder_once(experiment, enqueued):
    assert experiment.claim(1, "w1@host", 4242)
    now = timezone.now()  # sent two minutes ago, claimed, and w1 stopped renewing a second ago
    _age(experiment, dispatched_at=now - timedelta(seconds=120), lease_expires=now - timedelta(seconds=1))
    assert reconcile() == [(experiment.pk, 1)]
    assert reconcile() == []  # the re-sent copy is not re-sent again at once
    assert _sent(enqueued, experiment) == [1, 1]
    line = experiment.log_entries.get(level="warning").message
    assert line == "Round 1 was held by w1@host, which stopped answering; sent it again"
    assert execute_round(experiment.pk, 1, worker="w2@host") is not None  # the new copy may claim it


def test_it_resends_a_round_that_waited_unclaimed_too_long(experiment, enqueued, settings):
    assert reconcile() == []  # just sent: it may be waiting in the queue
    _age(experiment, dispatched_at=timezone.now() - timedelta(seconds=settings.ROUND_RESEND_AFTER + 1))
    assert reconcile() == [(experiment.pk, 1)]
    assert reconcile() == []
    assert _sent(enqueued, experiment) == [1, 1]


def test_it_does_not_reconcile_stopped_or_inline_runs(user, experiment, enqueued):
    inline = new_experiment(owner=user, name="inline", spec=TINY_SPEC)
    inline.start(enqueue=False)
    assert experiment.pause()
    _age(experiment, dispatched_round=0)
    assert reconcile() == []
    assert _sent(enqueued, experiment) == [1] and _sent(enqueued, inline) == []


def test_it_resumes_by_sending_the_next_round_again(experiment, enqueued):
    assert experiment.pause() and experiment.resume()
    assert _sent(enqueued, experiment) == [1, 1]
    assert Experiment.objects.get(pk=experiment.pk).status == Status.QUEUED


def test_it_tells_the_page_when_a_copy_arrives_for_a_cancelled_run(experiment):
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    from orchestrator.live import events

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(experiment.pk), channel)
    assert experiment.cancel()
    async_to_sync(layer.receive)(channel)  # the log line
    async_to_sync(layer.receive)(channel)  # the status at cancel time
    assert execute_round(experiment.pk, 1, worker="w") is None
    message = async_to_sync(layer.receive)(channel)
    assert message["type"] == "status" and message["status"] == "cancelled"


def test_it_resends_an_unclaimed_round_when_a_worker_of_its_queue_sits_idle(experiment, enqueued, settings):
    from orchestrator.fleet.workers import Worker

    # A worker took round 1 and died before claiming it; another worker of the queue is idle.
    _age(experiment, dispatched_at=timezone.now() - timedelta(seconds=settings.WORKER_LOST_AFTER + 1))
    busy = Worker.objects.create(hostname="busy@h", queue="cpu", current_experiment=experiment)
    assert reconcile() == []  # every worker of the queue is busy: the round may be waiting its turn
    Worker.objects.create(hostname="idle@h", queue="gpu,cpu")
    assert reconcile() == [(experiment.pk, 1)]
    assert reconcile() == []
    busy.delete()
    assert _sent(enqueued, experiment) == [1, 1]


def test_it_completes_a_run_whose_worker_died_after_recording_the_last_round(user, enqueued):
    e = new_experiment(owner=user, name="one round", spec={**TINY_SPEC, "rounds": 1})
    e.start()
    assert e.claim(1, "w1", 1) and e.advance(1)  # ... and died before complete()
    assert not e.claim(2, "w2", 2)  # there is no round 2
    assert reconcile() == []
    e.refresh_from_db()
    assert e.status == Status.COMPLETED and _sent(enqueued, e) == [1]


def test_it_completes_such_a_run_when_a_copy_of_its_last_round_arrives(user, enqueued):
    e = new_experiment(owner=user, name="one round", spec={**TINY_SPEC, "rounds": 1})
    e.start()
    assert e.claim(1, "w1", 1) and e.advance(1)
    assert execute_round(e.pk, 1, worker="w2") is None
    e.refresh_from_db()
    assert e.status == Status.COMPLETED and _sent(enqueued, e) == [1]
