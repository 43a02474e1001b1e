"""schedule(): a round of a run with plugins goes only to a live worker that has them at the
recorded hash (its own queue), or waits with the reason shown where other waiting reasons are."""

import pytest

from orchestrator.fleet.queues import submit_warnings, waiting_reason
from orchestrator.fleet.scheduling import reconcile, schedule
from orchestrator.models import Experiment, Worker
from tests.conftest import TINY_SPEC
from tests.plugins.conftest import HAS_IT, RECORDED

pytestmark = pytest.mark.django_db


def _new(owner, name: str = "run", plugins=RECORDED) -> Experiment:
    e = Experiment.objects.create(owner=owner, name=name, spec=TINY_SPEC)
    Experiment.objects.filter(pk=e.pk).update(plugins=plugins)  # a spec cannot name a plugin model yet
    e.refresh_from_db()
    e.start()
    e.refresh_from_db()
    return e


def _targets(enqueued) -> list[str]:
    return [getattr(kw["queue"], "name", kw["queue"]) for _, kw in enqueued]


def _worker(hostname: str, plugins=(), slots: int = 1) -> Worker:
    return Worker.objects.create(hostname=hostname, queue="cpu", slots=slots, plugins=list(plugins))


@pytest.mark.parametrize("policy", ["fifo", "srtf", "pack"])
def test_it_sends_the_round_to_the_worker_with_the_plugin_not_to_the_shared_queue(user, enqueued, settings, policy):
    settings.FEDWEB_POLICY = {"cpu": policy}
    _worker("a-plain@h", slots=2)
    _worker("b-plugin@h", HAS_IT)
    e = _new(user)
    assert _targets(enqueued) == ["b-plugin@h.dq2"]
    assert e.dispatched_to == "b-plugin@h" and e.dispatched_round == 1


def test_it_takes_a_worker_with_the_same_source_under_another_version(user, enqueued):
    _worker("w1@h", [{**HAS_IT[0], "version": "9.9.9"}])
    _new(user)
    assert _targets(enqueued) == ["w1@h.dq2"]


def test_a_run_whose_plugin_no_worker_has_at_that_hash_waits_with_the_reason(user, enqueued):
    _worker("w1@h", [{**HAS_IT[0], "hash": "other"}])
    e = _new(user)
    assert enqueued == [] and e.dispatched_round == 0
    assert waiting_reason("cpu", "cpu", plugins=e.plugins) == "no worker has plugin fedweb_test_plugin 1.2.0"
    assert submit_warnings(e) == [
        "Queued on 'cpu': no worker has plugin fedweb_test_plugin 1.2.0. It waits until a worker that loaded that "
        "plugin (FEDWEB_PLUGINS) serves the queue."
    ]


def test_the_reason_names_the_hash_of_a_plugin_without_a_version(user, enqueued):
    _worker("w1@h")
    e = _new(user, plugins=[{**RECORDED[0], "version": None}])
    assert waiting_reason("cpu", "cpu", plugins=e.plugins) == "no worker has plugin fedweb_test_plugin abc"


def test_the_reason_says_so_when_each_plugin_is_somewhere_but_no_worker_has_them_all(user, enqueued):
    other = {"kind": "codec", "name": "c", "plugin": "other_plugin", "version": "0.1", "hash": "def"}
    _worker("w1@h", HAS_IT)
    _worker("w2@h", [{"name": "other_plugin", "version": "0.1", "hash": "def", "components": ["codec:c"]}])
    e = _new(user, plugins=[*RECORDED, other])
    assert enqueued == []
    assert waiting_reason("cpu", "cpu", plugins=e.plugins) == (
        "no worker has plugins fedweb_test_plugin 1.2.0, other_plugin 0.1 together"
    )


def test_no_live_worker_serving_the_queue_comes_before_the_plugin_reason(user, enqueued):
    e = _new(user)
    assert enqueued == []  # held in the database, not the broker: no worker was chosen
    assert waiting_reason("cpu", "cpu", plugins=e.plugins) == "waiting for a worker serving cpu"


def test_a_run_waiting_for_its_plugin_does_not_hold_up_the_runs_behind_it(user, enqueued):
    _worker("w1@h")
    waiting, plain = _new(user, "waits"), _new(user, "plain", plugins=[])
    assert [args for args, _ in enqueued] == [(plain.pk, 1)]
    assert _targets(enqueued) == ["cpu"]
    waiting.refresh_from_db()
    assert waiting.dispatched_round == 0


def test_it_sends_the_waiting_round_when_a_worker_with_the_plugin_comes(user, enqueued):
    _worker("w1@h")
    e = _new(user)
    assert enqueued == []
    _worker("w2@h", HAS_IT)
    assert reconcile() == [(e.pk, 1)]  # what the new worker's first heartbeat runs
    assert _targets(enqueued) == ["w2@h.dq2"]
    assert waiting_reason("cpu", "cpu", plugins=e.plugins) == ""


def test_it_sends_no_more_to_the_worker_with_the_plugin_than_it_has_slots(user, enqueued):
    _worker("a-plain@h", slots=4)
    _worker("b-plugin@h", HAS_IT, slots=1)
    first, second = _new(user, "first"), _new(user, "second")
    assert [args for args, _ in enqueued] == [(first.pk, 1)]  # the plugin worker's one slot is taken
    assert first.claim(1, "b-plugin@h", 1) and first.advance(1)
    Experiment.objects.filter(pk=first.pk).update(status="paused")  # its slot is free again
    assert schedule("cpu") == [(second.pk, 1)]
    assert _targets(enqueued) == ["b-plugin@h.dq2", "b-plugin@h.dq2"]


def test_a_gang_of_a_run_with_plugins_recruits_only_workers_that_have_them(user, enqueued):
    from orchestrator.fleet import gangs

    _worker("a-plain@h", slots=2)
    _worker("b-plugin@h", HAS_IT)
    _worker("c-plugin@h", HAS_IT)
    _worker("d-plugin@h", HAS_IT)
    e = Experiment.objects.create(
        owner=user, name="ranked", spec={**TINY_SPEC, "compute": {"device": "cpu", "ranks": 4}}
    )
    Experiment.objects.filter(pk=e.pk).update(plugins=RECORDED, status="running", queue="cpu", worker="b-plugin@h")
    e.refresh_from_db()
    assert gangs.recruit(e, "b-plugin@h", 3) == ["c-plugin@h", "d-plugin@h"]  # never a-plain, never the leader
