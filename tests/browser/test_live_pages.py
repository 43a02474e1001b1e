"""Pages that follow their sockets in real Chromium, against real daphne and Redis: the leak badge
the server decides per round, and the Workers page driven by ``/ws/workers/`` (no polling)."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.live import events
from tests.browser.conftest import drawn, log_in
from tests.factories import round_result
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _off_the_loop(fn, *args) -> None:
    """Call ``fn`` in another thread: Playwright's sync API keeps an event loop in this one, where
    publishing (async_to_sync) refuses to run; a web or worker process publishes from plain threads."""
    thread = threading.Thread(target=fn, args=args)
    thread.start()
    thread.join()


def _requests(page) -> list[str]:
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    return urls


def test_it_raises_the_leak_badge_when_a_live_round_makes_memory_grow(page, alice, daphne):
    experiment = make_experiment(alice, rounds=6, spec={"rounds": 20})
    Experiment.objects.filter(pk=experiment.pk).update(status="running")
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('conn').textContent === 'live'")
    assert page.locator("#leak-badge").is_hidden()  # flat so far

    for n in range(7, 17):  # 25 MB more host memory every round: what a leak looks like
        metrics = round_result(n, rss_mb=500.0 + 25 * n)
        RoundMetric.record(experiment, metrics)
        _off_the_loop(events.publish_round, experiment.pk, metrics)
    page.wait_for_function("() => document.getElementById('chart-memory').data[0].x.length === 16")
    page.wait_for_function("() => !document.getElementById('leak-badge').hidden")
    assert "Host RSS grows" in page.get_attribute("#leak-badge", "title")
    rss = next(t for t in drawn(page, "chart-memory") if t[0] == "host RSS")
    assert rss[3][-1] == 500.0 + 25 * 16
    assert page.errors == []


def test_it_shows_the_status_line_from_status_events_without_asking_again(page, alice, daphne):
    experiment = make_experiment(alice, rounds=2, spec={"rounds": 5})
    Experiment.objects.filter(pk=experiment.pk).update(status="queued", queue=settings.FEDWEB_QUEUES[0])
    requested = _requests(page)
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('conn').textContent === 'live'")
    assert page.locator("#st-waiting").is_visible()  # no worker serves cpu yet

    experiment.refresh_from_db()
    assert experiment.claim(3, "w7@lab-box", 1234)  # a worker takes round 3: running, started
    experiment.refresh_from_db()
    _off_the_loop(events.publish_status, experiment)
    page.wait_for_function("() => document.getElementById('status-badge').textContent === 'running'")
    assert page.text_content("#st-worker") == "w7@lab-box"
    page.wait_for_function("() => document.getElementById('st-elapsed').textContent !== '–'")
    assert not [url for url in requested if "statuses.json" in url]

    assert page.errors == []


def test_it_follows_workers_and_queues_on_the_socket(page, alice, daphne):
    from workers.heartbeat import beat

    queue = settings.FEDWEB_QUEUES[0]
    make_experiment(alice, status="queued", queue=queue)
    requested = _requests(page)
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/workers/")
    page.wait_for_function("() => document.getElementById('conn').textContent === 'live'")
    assert f"waiting for a worker serving {queue}" in page.text_content("#queues")

    _off_the_loop(beat, "w9@lab-box", queue)  # a heartbeat: the worker's row and the queue table come on the socket
    page.wait_for_function("() => document.getElementById('workers').textContent.includes('w9@lab-box')")
    page.wait_for_function("() => document.getElementById('queues').textContent.includes('served')")
    assert "idle" in page.text_content("#workers")
    assert not [url for url in requested if "workers.json" in url]  # no polling

    # Its heartbeats stop: the page marks it lost by itself once WORKER_LOST_AFTER (5 s here) passes.
    page.wait_for_function("() => document.getElementById('workers').textContent.includes('lost')", timeout=15_000)
    page.wait_for_function("() => document.getElementById('queues').textContent.includes('waiting for a worker')")
    assert page.errors == []
