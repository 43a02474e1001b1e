import pytest

from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import LogEntry, RoundMetric
from orchestrator.fleet.workers import Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result

pytestmark = pytest.mark.django_db


@pytest.fixture
def experiment(user):
    return new_experiment(owner=user, name="tiny", spec=TINY_SPEC)


def test_a_stored_spec_must_load_to_pass_full_clean(user):
    from django.core.exceptions import ValidationError

    bad = Experiment(owner=user, name="bad", spec={"rounds": "many"})
    with pytest.raises(ValidationError, match="rounds"):
        bad.full_clean()


def test_it_lets_only_the_owner_view_and_control(experiment, other_user, django_user_model):
    from django.contrib.auth.models import AnonymousUser

    assert access.can_view(experiment, experiment.owner) and access.can_control(experiment, experiment.owner)
    assert not access.can_view(experiment, other_user) and not access.can_control(experiment, other_user)
    assert not access.can_view(experiment, AnonymousUser()) and not access.can_view(experiment, None)


def test_it_starts_a_draft_once_and_enqueues_round_one(experiment, enqueued):
    assert experiment.start(by="alice")
    assert experiment.status == Status.QUEUED and experiment.queue == "cpu"
    assert not experiment.start()  # already queued
    assert enqueued == [((experiment.pk, 1), {"queue": "cpu"})]
    assert LogEntry.objects.filter(experiment=experiment, message__contains="Queued").exists()


def test_it_picks_the_queue_from_the_device(user, enqueued):
    from orchestrator.fleet.workers import pick_queue

    gpu = new_experiment(owner=user, name="g", spec={**TINY_SPEC, "compute": {"device": "cuda:0"}})
    gpu.start()
    assert gpu.queue == "gpu" and enqueued[-1][1] == {"queue": "gpu"}
    auto = new_experiment(owner=user, name="a", spec={**TINY_SPEC, "compute": {"device": "auto"}})
    assert pick_queue(auto.parsed_spec()) == "cpu"  # no live GPU worker
    Worker.objects.create(hostname="gpu0@box", queue="gpu")
    assert pick_queue(auto.parsed_spec()) == "gpu"


def test_it_pauses_resumes_and_cancels_with_conditional_updates(experiment, enqueued):
    assert not experiment.pause() and not experiment.resume()  # a draft can't be paused
    experiment.start()
    Experiment.objects.filter(pk=experiment.pk).update(current_round=2)
    assert experiment.pause() and experiment.status == Status.PAUSED
    assert not experiment.pause()
    assert experiment.resume() and experiment.status == Status.QUEUED
    assert enqueued[-1][0] == (experiment.pk, 3)  # resumes after the last recorded round
    assert experiment.cancel() and experiment.status == Status.CANCELLED and experiment.finished
    assert not experiment.cancel() and not experiment.resume()


def test_it_claims_a_round_only_once_and_advances_once(experiment, enqueued):
    experiment.start()
    assert not experiment.claim(2, "w", 1)  # round 1 not done yet
    assert experiment.claim(1, "w", 1)
    assert not experiment.claim(1, "w2", 2)  # a duplicate while round 1 is in flight does no work
    assert experiment.advance(1)
    assert not experiment.advance(1)  # a racing duplicate of round 1 loses
    assert not experiment.claim(1, "w", 1)  # a late redelivery of round 1 does nothing
    experiment.pause()
    assert not experiment.claim(2, "w", 1)  # paused: the queued round does nothing


def test_it_hands_a_round_to_another_worker_once_its_holders_lease_runs_out(experiment, enqueued):
    from datetime import timedelta

    from django.utils import timezone

    experiment.start()
    assert experiment.claim(1, "w1", 10)
    experiment.refresh_from_db()
    assert experiment.round_in_flight() and experiment.worker == "w1" and experiment.claim_pid == 10
    Experiment.objects.filter(pk=experiment.pk).update(lease_expires=timezone.now() - timedelta(seconds=1))
    experiment.refresh_from_db()
    assert not experiment.round_in_flight()
    assert experiment.claim(1, "w2", 20)  # w1 stopped renewing: it is dead, w2 takes the round
    assert not experiment.claim(1, "w1", 10)


def test_it_stores_one_metric_per_round(experiment):
    result = round_result(1, train_loss=1.0, test_loss=None, test_accuracy=None)
    RoundMetric.record(experiment, result)
    RoundMetric.record(experiment, {**result, "train_loss": 9.0})
    assert list(experiment.rounds.values_list("round", "train_loss")) == [(1, 1.0)]
    assert experiment.rounds.get().to_result_dict() == result


def test_it_shows_a_worker_as_lost_after_a_minute(settings):
    from datetime import timedelta

    from django.utils import timezone

    w = Worker.objects.create(hostname="w@h", queue="cpu")
    assert not w.is_lost and list(Worker.live()) == [w]
    w.last_heartbeat = timezone.now() - timedelta(seconds=settings.WORKER_LOST_AFTER + 1)
    w.save()
    assert w.is_lost and not Worker.live().exists()
