"""schedule(by=): an experiment's next round goes to the worker that ran its previous round, through that
worker's own queue, when that worker itself schedules after its round and has a free slot; otherwise
(busy, or scheduled by anyone else: a heartbeat, the web) to the shared queue (issue 17)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator.experiments.models import Experiment
from orchestrator.fleet.scheduling import reconcile, schedule
from orchestrator.fleet.workers import Worker
from tests.fleet.test_schedule import _measured, _new

pytestmark = pytest.mark.django_db


def _targets(enqueued) -> list[str]:
    return [getattr(kw["queue"], "name", kw["queue"]) for _, kw in enqueued]


def _ran_round_on(e: Experiment, hostname: str) -> None:
    e.refresh_from_db()
    n = e.current_round + 1
    assert e.claim(n, hostname, 1)
    _measured(e, n, 1.0, 300.0)
    assert e.advance(n)


@pytest.fixture
def two_workers():
    return [Worker.objects.create(hostname=h, queue="cpu", slots=1) for h in ("w1@h", "w2@h")]


def test_it_sends_the_next_round_to_the_worker_that_ran_the_previous_one(user, two_workers, enqueued):
    e = _new(user, "a")
    assert _targets(enqueued) == ["cpu"]  # round 1: nobody holds it, any worker takes it
    _ran_round_on(e, "w2@h")
    assert schedule("cpu", by="w2@h") == [(e.pk, 2)]
    assert _targets(enqueued)[-1] == "w2@h.dq2"
    assert Experiment.objects.get(pk=e.pk).dispatched_to == "w2@h"


def _recorded_ago(e: Experiment, seconds: float) -> None:
    Experiment.objects.filter(pk=e.pk).update(ready_since=timezone.now() - timedelta(seconds=seconds))


def test_another_scheduler_sends_a_held_experiment_to_the_shared_queue_once_the_grace_is_over(
    user, two_workers, enqueued, settings
):
    # w1 recorded round 1, then died before scheduling round 2; its heartbeat is not stale yet. w2's
    # heartbeat (or the web) must not send round 2 to w1's own queue, where it would wait for the
    # reconciler: after the grace it goes where any live worker takes it.
    settings.FEDWEB_AFFINITY_GRACE = 5
    e = _new(user, "a")
    _ran_round_on(e, "w1@h")
    _recorded_ago(e, 6)
    assert schedule("cpu") == [(e.pk, 2)]
    assert _targets(enqueued)[-1] == "cpu"


def test_a_heartbeat_right_after_a_record_leaves_the_round_to_its_holder(user, two_workers, enqueued, settings):
    # The race: w1 records round 1 and a heartbeat's pass runs before w1's own pass. The heartbeat
    # leaves round 2 alone (it would go to the shared queue, and w2 would load the state); w1's pass
    # sends it back to w1.
    settings.FEDWEB_AFFINITY_GRACE = 5
    e = _new(user, "a")
    _ran_round_on(e, "w1@h")
    sends = len(enqueued)
    assert schedule("cpu") == []
    assert len(enqueued) == sends
    assert Experiment.objects.get(pk=e.pk).dispatched_round == 1  # still ready, not sent
    assert schedule("cpu", by="w1@h") == [(e.pk, 2)]
    assert _targets(enqueued)[-1] == "w1@h.dq2"


def test_the_holders_kept_slot_counts_as_taken_for_the_other_rounds(user, two_workers, enqueued, settings):
    # Two workers with one slot each: a's round 2 is kept for w1, so the heartbeat's pass has one slot
    # left, which b's round takes (on the shared queue); c waits. Then w1 takes a back.
    settings.FEDWEB_AFFINITY_GRACE = 5
    settings.FEDWEB_POLICY = {"cpu": "fifo"}
    a = _new(user, "a")
    _ran_round_on(a, "w1@h")
    b, c = _new(user, "b"), _new(user, "c")
    for run in (b, c):  # their first rounds were sent on start; make them ready again, unsent
        Experiment.objects.filter(pk=run.pk).update(dispatched_round=0, dispatched_at=None)
    assert schedule("cpu") == [(b.pk, 1)]
    assert schedule("cpu", by="w1@h") == [(a.pk, 2)]
    assert _targets(enqueued)[-1] == "w1@h.dq2"


def test_no_grace_for_a_holder_that_is_not_live(user, two_workers, enqueued, settings):
    settings.FEDWEB_AFFINITY_GRACE = 5
    a = _new(user, "a")
    _ran_round_on(a, "w1@h")
    Worker.objects.filter(hostname="w1@h").update(last_heartbeat=timezone.now() - timedelta(hours=1))
    assert schedule("cpu") == [(a.pk, 2)]  # w1 is gone: its own pass will never come
    assert _targets(enqueued)[-1] == "cpu"


def test_no_grace_for_a_holder_without_a_free_slot(user, two_workers, enqueued, settings):
    settings.FEDWEB_AFFINITY_GRACE = 5
    a, b = _new(user, "a"), _new(user, "b")
    _ran_round_on(b, "w1@h")
    _ran_round_on(a, "w1@h")
    b.refresh_from_db()
    assert b.claim(2, "w1@h", 1)  # w1 runs b's round 2 now: its own pass would send a's to the shared queue
    assert schedule("cpu") == [(a.pk, 2)]
    assert _targets(enqueued)[-1] == "cpu"


def test_it_sends_to_the_shared_queue_when_the_holder_is_busy(user, two_workers, enqueued):
    a, b = _new(user, "a"), _new(user, "b")
    _ran_round_on(a, "w1@h")
    _ran_round_on(b, "w1@h")
    b.refresh_from_db()
    assert b.claim(2, "w1@h", 1)  # w1 runs b's round 2 now
    assert schedule("cpu", by="w1@h") == [(a.pk, 2)]
    assert _targets(enqueued)[-1] == "cpu"


def test_a_round_sent_to_a_holder_that_died_is_sent_again_to_the_shared_queue(user, two_workers, enqueued):
    e = _new(user, "a")
    _ran_round_on(e, "w1@h")
    schedule("cpu", by="w1@h")
    assert _targets(enqueued)[-1] == "w1@h.dq2"
    Worker.objects.filter(hostname="w1@h").update(last_heartbeat=timezone.now() - timedelta(hours=1))
    assert (e.pk, 2) in reconcile()
    assert _targets(enqueued)[-1] == "cpu"
    assert e.log_entries.filter(message="Round 2 was sent to w1@h, which stopped answering; sent it again").exists()


def test_a_round_whose_holder_let_its_lease_run_out_goes_to_the_shared_queue(user, two_workers, enqueued):
    e = _new(user, "a")
    _ran_round_on(e, "w1@h")
    schedule("cpu", by="w1@h")
    e.refresh_from_db()
    assert e.claim(2, "w1@h", 1)  # w1 took round 2, then died with it: its lease runs out
    now = timezone.now()
    Experiment.objects.filter(pk=e.pk).update(
        dispatched_at=now - timedelta(seconds=10), lease_expires=now - timedelta(seconds=1)
    )
    assert (e.pk, 2) in reconcile()  # w1 still looks live (its last heartbeat is recent)
    assert _targets(enqueued)[-1] == "cpu"  # not back to w1's own queue
