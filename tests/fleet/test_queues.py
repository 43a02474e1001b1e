"""Queues: who serves them, how deep they are, and why a run waits (orchestrator/fleet/queues.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator.experiments.models import Experiment
from orchestrator.fleet.queues import broker_message_counts, queue_states, submit_warnings, waiting_reason
from orchestrator.fleet.workers import Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment

pytestmark = pytest.mark.django_db

H100 = {"index": 0, "name": "H100", "total_mb": 81559, "used_mb": 1200}


def live_worker(hostname: str, queue: str, gpus: int = 0) -> Worker:
    devices = [{**H100, "index": i} for i in range(gpus)]
    return Worker.objects.create(hostname=hostname, queue=queue, devices=devices)


def lost_worker(hostname: str, queue: str) -> Worker:
    return Worker.objects.create(hostname=hostname, queue=queue, last_heartbeat=timezone.now() - timedelta(hours=1))


def run(owner, device: str = "cpu", status: str = "queued", queue: str = "cpu") -> Experiment:
    spec = {**TINY_SPEC, "compute": {"device": device}}
    experiment = new_experiment(owner=owner, name=f"{device} run", spec=spec)
    Experiment.objects.filter(pk=experiment.pk).update(status=status, queue=queue)
    experiment.refresh_from_db()
    return experiment


def test_it_waits_for_a_worker_serving_the_queue_when_none_is_live():
    lost_worker("gpu0@box", "gpu")
    live_worker("cpu0@box", "cpu")
    assert waiting_reason("gpu", "cuda") == "waiting for a worker serving gpu"
    assert waiting_reason("cpu", "cpu") == ""


def test_it_names_the_gpu_index_no_live_worker_has():
    live_worker("cpu0@box", "cpu,gpu")  # serves gpu, but reports no GPU
    live_worker("gpu0@box", "gpu", gpus=2)
    assert waiting_reason("gpu", "cuda:7") == "no live worker has GPU 7"
    assert waiting_reason("gpu", "cuda:1") == ""
    assert waiting_reason("gpu", "cuda:all") == ""


def test_it_warns_of_a_gpu_run_on_a_cpu_only_set_of_live_workers(user):
    live_worker("cpu0@box", "cpu")
    assert submit_warnings(run(user, "cuda:7", queue="gpu")) == [
        "Queued on 'gpu': waiting for a worker serving gpu. Start one with "
        "`celery -A fedweb worker -Q gpu --concurrency 1`."
    ]
    live_worker("both@box", "cpu,gpu")  # now something serves gpu, but without GPU 7
    (warning,) = submit_warnings(run(user, "cuda:7", queue="gpu"))
    assert warning.startswith("Queued on 'gpu': no live worker has GPU 7.")
    live_worker("nvml-less@box", "gpu")
    (warning,) = submit_warnings(run(user, "cuda", queue="gpu"))
    assert "no live worker has a GPU" in warning


def test_it_gives_no_warning_when_a_live_worker_can_take_the_run_or_it_does_not_wait(user):
    live_worker("cpu0@box", "cpu")
    assert submit_warnings(run(user, "cpu")) == []
    assert submit_warnings(run(user, "cuda", status="draft", queue="")) == []
    assert submit_warnings(run(user, "cuda", status="paused", queue="gpu")) == []


def test_it_counts_queued_and_running_runs_per_queue_and_lists_extra_queues(user, settings):
    settings.FEDWEB_POLICY = {"gpu": "pack"}
    live_worker("cpu0@box", "cpu")
    lost_worker("gpu0@box", "gpu")
    live_worker("big@box", "bigmem", gpus=1)
    for status in ("queued", "queued", "running", "paused", "completed"):
        run(user, "cuda", status=status, queue="gpu")
    run(user, "cpu", status="running", queue="cpu")
    run(user, "cpu", status="queued", queue="inline")  # run in a terminal: no queue to show
    states = {q.name: q for q in queue_states()}
    assert list(states) == ["cpu", "gpu", "bigmem"]
    gpu = states["gpu"].to_dict()
    assert gpu == {"name": "gpu", "queued": 2, "running": 1, "depth": 3, "live_workers": 0, "messages": None,
                   "reason": "waiting for a worker serving gpu", "policy": "pack"}  # fmt: skip
    assert (states["cpu"].depth, len(states["cpu"].workers), states["cpu"].reason) == (1, 1, "")
    assert (states["bigmem"].depth, states["bigmem"].reason, states["bigmem"].policy) == (0, "", "fifo")
    Worker.objects.filter(hostname="big@box").delete()
    assert [q.name for q in queue_states()] == ["cpu", "gpu"]  # neither configured, served nor waited on


def test_it_says_no_live_worker_for_an_unserved_queue_nothing_waits_on():
    live_worker("cpu0@box", "cpu")
    assert [(q.name, q.depth, q.reason) for q in queue_states()] == [("cpu", 0, ""), ("gpu", 0, "no live worker")]


def test_it_answers_without_broker_counts_when_the_broker_is_away(settings):
    from fedweb.celery import app

    saved = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        assert broker_message_counts(["cpu", "gpu"]) == {}
        assert [q.messages for q in queue_states(broker=True)] == [None, None]
    finally:
        app.conf.broker_url = saved


@pytest.mark.integration
def test_it_reads_the_broker_message_count_of_each_queue(live_env):
    from kombu import Queue

    from fedweb.celery import app

    gpu = Queue("gpu", routing_key="gpu")
    with app.connection_for_write() as conn:
        for i in range(3):
            conn.Producer().publish({"n": i}, routing_key="gpu", declare=[gpu])
        try:
            assert broker_message_counts(["cpu", "gpu"]) == {"cpu": 0, "gpu": 3}
        finally:
            gpu.bind(conn.default_channel).purge()
