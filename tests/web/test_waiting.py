"""A waiting run says why: at submit, on its dashboard and on the Workers page."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.workers import Worker
from tests.factories import round_result
from tests.web.conftest import make_experiment
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db

NO_CPU_WORKER = "Queued on &#x27;cpu&#x27;: waiting for a worker serving cpu."


def queued(owner, device: str, queue: str, name: str = "run") -> Experiment:
    experiment = make_experiment(owner, name=name, spec={"compute": {"device": device}})
    Experiment.objects.filter(pk=experiment.pk).update(status="queued", queue=queue, queued_at=timezone.now())
    experiment.refresh_from_db()
    return experiment


def waiting_line(html: str) -> tuple[bool, str]:
    """(shown, text) of the dashboard status line's waiting item."""
    match = re.search(r'<span class="item badge warning" id="st-waiting"( hidden)?>(.*?)</span>', html)
    assert match, "the status line has no waiting item"
    return match.group(1) is None, match.group(2)


def test_it_warns_at_submit_when_no_live_worker_serves_the_queue(alice_client, enqueued):
    response = alice_client.post("/experiments/new/", form_data(), follow=True)
    experiment = Experiment.objects.get()
    assert experiment.status == "queued" and len(enqueued) == 1  # a warning, not a refusal
    assert response.redirect_chain == [(f"/experiments/{experiment.pk}/", 302)]
    html = response.content.decode()
    assert NO_CPU_WORKER in html and "celery -A fedweb worker -Q cpu --concurrency 1" in html


def test_it_does_not_warn_at_submit_when_a_live_worker_serves_the_queue(alice_client, enqueued):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")
    html = alice_client.post("/experiments/new/", form_data(), follow=True).content.decode()
    assert "waiting for a worker" not in html and 'class="messages"' not in html


def test_it_warns_at_submit_of_a_gpu_index_no_live_worker_has(alice_client, enqueued):
    Worker.objects.create(hostname="cpu0@box", queue="cpu,gpu")  # a CPU-only machine serving both
    html = alice_client.post("/experiments/new/", form_data(compute__device="cuda:7"), follow=True).content.decode()
    assert "Queued on &#x27;gpu&#x27;: no live worker has GPU 7." in html


def test_it_shows_queue_depth_and_reason_on_the_dashboard_while_nothing_serves_the_queue(alice_client, user):
    queued(user, "cuda", "gpu", name="ahead")
    experiment = queued(user, "cuda:7", "gpu")
    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert waiting_line(html) == (True, "Queue gpu · depth 2 · waiting for a worker serving gpu")
    body = alice_client.get(f"/experiments/statuses.json?ids={experiment.pk}").json()
    assert body["experiments"][str(experiment.pk)]["waiting"] == {
        "queue": "gpu", "depth": 2, "reason": "waiting for a worker serving gpu",
        "text": "Queue gpu · depth 2 · waiting for a worker serving gpu",
    }  # fmt: skip

    Worker.objects.create(hostname="gpu0@box", queue="gpu", devices=[{"index": 0, "name": "H100"}])
    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert waiting_line(html) == (True, "Queue gpu · depth 2 · no live worker has GPU 7")  # it has GPU 0 only
    body = alice_client.get(f"/experiments/statuses.json?ids={experiment.pk}").json()
    assert body["experiments"][str(experiment.pk)]["waiting"]["reason"] == "no live worker has GPU 7"


def test_it_hides_the_waiting_line_once_a_live_worker_can_take_the_run(alice_client, user):
    experiment = queued(user, "cuda", "gpu")
    Worker.objects.create(hostname="gpu0@box", queue="gpu", devices=[{"index": 0, "name": "H100"}])
    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()
    assert waiting_line(html) == (False, "")
    body = alice_client.get(f"/experiments/statuses.json?ids={experiment.pk}").json()
    assert body["experiments"][str(experiment.pk)]["waiting"] is None


def test_it_lists_queues_with_depth_live_workers_and_reason_on_the_workers_page(alice_client, user, other_user):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")
    queued(user, "cuda", "gpu")
    queued(other_user, "cuda", "gpu", name="theirs")  # depth counts every run, names none
    html = alice_client.get("/workers/").content.decode()
    policy = '<span class="badge" title="scheduling policy">fifo</span>'  # FEDWEB_POLICY names no queue here
    assert f'<td><code>gpu</code> {policy}</td><td class="num">2</td>' in html
    assert '<span class="badge warning">waiting for a worker serving gpu</span>' in html and "theirs" not in html
    queues = {q["name"]: q for q in alice_client.get("/workers.json").json()["queues"]}
    assert queues["gpu"]["depth"] == 2 and queues["gpu"]["live_workers"] == 0 and queues["gpu"]["policy"] == "fifo"
    assert queues["gpu"]["reason"] == "waiting for a worker serving gpu"
    assert queues["cpu"]["live_workers"] == 1 and queues["cpu"]["reason"] == ""


def running(owner, *, rounds_done: int, total: int, round_seconds: float | None, name: str) -> Experiment:
    """A run on the cpu queue that has done ``rounds_done`` of ``total`` rounds, each measured at
    ``round_seconds`` (None: no round recorded yet)."""
    experiment = make_experiment(owner, name=name)
    for n in range(1, rounds_done + 1):
        RoundMetric.record(experiment, round_result(n, round_seconds=round_seconds))
    Experiment.objects.filter(pk=experiment.pk).update(
        status="running", queue="cpu", current_round=rounds_done, total_rounds=total, queued_at=timezone.now()
    )
    return experiment


def test_a_queued_run_behind_another_says_what_it_waits_for_and_about_how_long(alice_client, user, other_user):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")  # a live worker: not a wait for a worker
    running(other_user, rounds_done=2, total=10, round_seconds=30.0, name="the demo's long run")
    experiment = queued(user, "cpu", "cpu")
    expected = "Queue cpu · depth 2 · behind 1 running experiment on the cpu queue (fifo); about 4 min"  # 8 x 30 s

    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()

    assert waiting_line(html) == (True, expected) and "the demo&#x27;s long run" not in html
    body = alice_client.get(f"/experiments/statuses.json?ids={experiment.pk}").json()
    assert body["experiments"][str(experiment.pk)]["waiting"]["text"] == expected


def test_the_wait_counts_runs_queued_earlier_and_says_unknown_when_nothing_is_measured(alice_client, user):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")
    running(user, rounds_done=0, total=50, round_seconds=None, name="first")
    queued(user, "cpu", "cpu", name="second")
    experiment = queued(user, "cpu", "cpu", name="third")
    Experiment.objects.filter(pk=experiment.pk).update(queued_at=timezone.now() + timedelta(seconds=1))

    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()

    reason = "behind 1 running and 1 queued experiments on the cpu queue (fifo); time unknown (no round measured yet)"
    assert waiting_line(html) == (True, f"Queue cpu · depth 3 · {reason}")


def test_a_queued_run_with_nothing_ahead_and_a_live_worker_shows_no_wait(alice_client, user):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")
    experiment = queued(user, "cpu", "cpu")

    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()

    assert waiting_line(html) == (False, "")


def test_a_background_run_such_as_the_demo_is_never_ahead_of_a_users_run(alice_client, user, other_user):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")
    demo = running(other_user, rounds_done=2, total=200, round_seconds=1.5, name="Demo: live quickstart")
    Experiment.objects.filter(pk=demo.pk).update(background=True)
    experiment = queued(user, "cpu", "cpu")

    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()

    assert waiting_line(html) == (False, "")  # not "behind 1 running experiment ... about 5 min"
