"""The fleet collector behind GET /metrics: every figure against the database state it reads."""

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest

from orchestrator.experiments.models import Status
from orchestrator.fleet.prometheus import SETTLE_S, FleetCollector, RoundTally
from orchestrator.fleet.workers import Worker
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.fleet.metrics_helpers import parse, round_row, value

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def scrape(clock):
    """Scrape one collector (one process's tally) as Prometheus would."""
    registry = CollectorRegistry()
    registry.register(FleetCollector(RoundTally(clock=clock)))
    return lambda: parse(generate_latest(registry).decode())


def _experiment(user, status=Status.DRAFT, queue="", name="e"):
    return new_experiment(owner=user, name=name, spec=TINY_SPEC, status=status, queue=queue)


def test_it_reports_queue_depth_per_queue_with_its_policy(user, settings, scrape):
    settings.FEDWEB_POLICY = {"cpu": "srtf"}  # as fedweb.env.env_choices reads FEDWEB_POLICY=cpu=srtf
    _experiment(user, Status.QUEUED, "cpu")
    _experiment(user, Status.RUNNING, "cpu")
    _experiment(user, Status.QUEUED, "gpu")
    _experiment(user, Status.PAUSED, "cpu")  # waits on no queue
    _experiment(user, Status.COMPLETED, "cpu")
    samples = scrape()
    assert value(samples, "fedweb_queue_depth", queue="cpu", policy="srtf") == 2
    assert value(samples, "fedweb_queue_depth", queue="gpu", policy="fifo") == 1
    assert value(samples, "fedweb_queue_live_workers", queue="cpu") == 0


def test_it_counts_experiments_by_status_with_every_status_present(user, scrape):
    _experiment(user, Status.QUEUED, "cpu")
    _experiment(user, Status.COMPLETED, "cpu")
    _experiment(user, Status.COMPLETED, "cpu")
    samples = scrape()
    assert value(samples, "fedweb_experiments", status="completed") == 2
    assert value(samples, "fedweb_experiments", status="queued") == 1
    assert value(samples, "fedweb_experiments", status="failed") == 0
    assert value(samples, "fedweb_experiments") == 3  # summed over statuses


def test_it_reports_liveness_and_the_gpu_memory_of_live_workers_only(user, scrape):
    gpu = {"index": 1, "name": "NVIDIA H100", "used_mb": 1024, "total_mb": 81559}
    running = _experiment(user, Status.RUNNING, "gpu")
    Worker.objects.create(hostname="gpu1@a", queue="gpu", devices=[gpu], current_experiment=running)
    stale = timezone.now() - timedelta(hours=1)
    Worker.objects.create(hostname="gpu0@b", queue="gpu", devices=[{**gpu, "index": 0}], last_heartbeat=stale)
    samples = scrape()
    assert value(samples, "fedweb_worker_up", worker="gpu1@a") == 1
    assert value(samples, "fedweb_worker_up", worker="gpu0@b") == 0
    assert value(samples, "fedweb_worker_busy", worker="gpu1@a") == 1
    assert value(samples, "fedweb_queue_live_workers", queue="gpu") == 1
    assert value(samples, "fedweb_gpu_memory_used_bytes", worker="gpu1@a", gpu="1", name="NVIDIA H100") == 1024 * 2**20
    assert value(samples, "fedweb_gpu_memory_total_bytes", worker="gpu1@a") == 81559 * 2**20
    assert value(samples, "fedweb_gpu_memory_used_bytes", worker="gpu0@b") is None  # lost: its figures are stale
    assert value(samples, "fedweb_worker_last_heartbeat_timestamp_seconds", worker="gpu0@b") == stale.timestamp()


def test_it_counts_rounds_recorded_after_the_first_scrape_in_a_histogram(user, scrape):
    cpu = _experiment(user, Status.RUNNING, "cpu")
    round_row(cpu, 1, 0.3)  # before this process first looked: not counted
    assert value(scrape(), "fedweb_rounds_total") is None
    round_row(cpu, 2, 0.2)
    round_row(cpu, 3, 7.0)
    gpu = _experiment(user, Status.RUNNING, "gpu", name="g")
    round_row(gpu, 1, 0.04, device="cuda:0 (NVIDIA H100)")
    samples = scrape()
    assert value(samples, "fedweb_rounds_total", queue="cpu", device="cpu") == 2
    assert value(samples, "fedweb_rounds_total", queue="gpu", device="cuda:0 (NVIDIA H100)") == 1
    assert value(samples, "fedweb_round_duration_seconds_count", queue="cpu") == 2
    assert value(samples, "fedweb_round_duration_seconds_sum", queue="cpu") == pytest.approx(7.2)
    assert value(samples, "fedweb_round_duration_seconds_bucket", queue="cpu", le="0.25") == 1
    assert value(samples, "fedweb_round_duration_seconds_bucket", queue="cpu", le="5.0") == 1
    assert value(samples, "fedweb_round_duration_seconds_bucket", queue="cpu", le="10.0") == 2
    assert value(samples, "fedweb_round_duration_seconds_bucket", queue="cpu", le="+Inf") == 2
    assert value(samples, "fedweb_round_duration_seconds_bucket", queue="gpu", le="0.05") == 1
    assert value(scrape(), "fedweb_rounds_total") == 3  # a row is counted once, however often it is scraped


def test_it_never_lowers_the_round_count_when_an_experiment_is_deleted(user, scrape):
    scrape()
    doomed = _experiment(user, Status.RUNNING, "cpu")
    for n in (1, 2, 3):
        round_row(doomed, n, 0.1)
    assert value(scrape(), "fedweb_rounds_total") == 3
    doomed.delete()
    assert value(scrape(), "fedweb_rounds_total") == 3  # a drop would read as a counter reset


def test_it_counts_a_row_that_commits_after_a_larger_id_was_seen(user, scrape, clock):
    # PostgreSQL hands out ids before commit: id 50 may become visible after id 60 was counted.
    scrape()
    e = _experiment(user, Status.RUNNING, "cpu")
    round_row(e, 2, 0.1, id=60)
    assert value(scrape(), "fedweb_rounds_total") == 1
    clock.now += SETTLE_S / 2
    round_row(e, 1, 0.1, id=50)
    assert value(scrape(), "fedweb_rounds_total") == 2
    clock.now += SETTLE_S
    scrape()  # both settle: the cursor passes them
    round_row(e, 3, 0.1, id=70)
    assert value(scrape(), "fedweb_rounds_total") == 3
