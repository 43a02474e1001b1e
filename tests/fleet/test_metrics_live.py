"""Scraping a real fleet: daphne's /metrics and a Celery worker's endpoint during and after a run."""

import urllib.error
import urllib.request

import pytest

from fedweb.localredis import free_port
from orchestrator.experiments.models import Status
from orchestrator.experiments.records import RoundMetric
from tests import live
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.fleet.metrics_helpers import parse, value

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOKEN = "live-metrics-token-0123456789"
ROUNDS = 6
SPEC = {**TINY_SPEC, "rounds": ROUNDS, "local": {"epochs": 30}}  # rounds of a few tenths of a second


def _scrape(url: str, token: str | None = TOKEN):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return parse(response.read().decode())
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture
def fleet(live_env, workers, tmp_path):
    """daphne and worker w1, both behind the token; yields (web URL, worker URL)."""
    env = {"FEDWEB_METRICS_TOKEN": TOKEN, "FEDWEB_WORKER_METRICS_PORT": str(free_port())}
    port = free_port()
    web = live.start_daphne({**live_env, **env}, tmp_path, port, wait=True)
    worker = workers.start("w1", env=env)
    urls = (f"http://127.0.0.1:{port}/metrics", f"http://127.0.0.1:{env['FEDWEB_WORKER_METRICS_PORT']}/metrics")
    try:
        live.wait_for(lambda: isinstance(_scrape(urls[1]), dict), 30, "the worker's metrics endpoint")
    except TimeoutError:
        raise AssertionError(f"no worker metrics endpoint:\n{worker.output()}") from None
    yield urls
    web.stop()


def _rounds_stored(experiment) -> int:
    return RoundMetric.objects.filter(experiment=experiment).count()


def test_it_scrapes_numbers_that_move_with_a_live_run(user, fleet):
    web_url, worker_url = fleet
    assert _scrape(web_url, token=None) == 401 and _scrape(worker_url, token=None) == 401
    start = _scrape(web_url)  # this daphne's round tally starts counting here
    assert value(start, "fedweb_worker_up", worker=_w1()) == 1
    assert value(start, "fedweb_rounds_total") is None

    e = new_experiment(owner=user, name="scraped", spec=SPEC)
    assert e.start()
    midway, busy_seen = None, False
    while True:
        e.refresh_from_db()
        if e.status not in (Status.QUEUED, Status.RUNNING):
            break
        stored_before = _rounds_stored(e)
        web = _scrape(web_url)
        stored_after = _rounds_stored(e)
        counted = value(web, "fedweb_rounds_total") or 0
        assert stored_before <= counted <= stored_after  # every stored round, no more
        if 0 < counted < ROUNDS and value(web, "fedweb_experiments", status="running") == 1:
            midway = web
        busy_seen = busy_seen or value(_scrape(worker_url), "fedweb_worker_active_rounds") == 1

    assert e.status == Status.COMPLETED, e.error
    assert midway is not None, "no scrape caught the run between its first and last round"
    assert value(midway, "fedweb_queue_depth", queue="cpu", policy="fifo") == 1
    assert busy_seen, "the worker endpoint never showed a round running"

    end = _scrape(web_url)
    seconds = sorted(RoundMetric.objects.filter(experiment=e).values_list("round_seconds", flat=True))
    assert value(end, "fedweb_rounds_total", queue="cpu", device="cpu") == ROUNDS
    assert value(end, "fedweb_round_duration_seconds_count", queue="cpu") == ROUNDS
    assert value(end, "fedweb_round_duration_seconds_sum", queue="cpu") == pytest.approx(sum(seconds))
    assert value(end, "fedweb_round_duration_seconds_bucket", queue="cpu", le="+Inf") == ROUNDS
    assert value(end, "fedweb_queue_depth", queue="cpu") == 0
    assert value(end, "fedweb_experiments", status="completed") == 1
    assert value(end, "fedweb_experiments", status="running") == 0

    first = _scrape(worker_url)
    assert value(first, "fedweb_worker_info", worker=_w1(), queues="cpu") == 1
    assert value(first, "fedweb_worker_pool_rss_bytes") > 10 * 2**20  # a pool child that imported torch
    live.wait_for(lambda: value(_scrape(worker_url), "fedweb_worker_active_rounds") == 0, 10, "the pool to go idle")
    beat = value(first, "fedweb_worker_last_heartbeat_timestamp_seconds")
    live.wait_for(lambda: value(_scrape(worker_url), "fedweb_worker_last_heartbeat_timestamp_seconds") > beat, 10,
                  "a newer heartbeat")  # fmt: skip


def _w1() -> str:
    from orchestrator.fleet.workers import Worker

    return Worker.objects.get(hostname__startswith="w1@").hostname
