import pytest

from orchestrator.fleet.workers import Worker
from tests.factories import new_experiment
from workers import gpus, heartbeat

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_queue_table(monkeypatch):
    """Each test starts with a worker that has sent no queue table yet."""
    monkeypatch.setattr(heartbeat, "queue_table", heartbeat.QueueTable())


def _always_publish(self, now: float) -> bool:
    # Which worker publishes, whatever the table: the test below is about the role, not changes.
    from orchestrator.live import events

    events.publish_queues([])
    return True


def test_it_records_a_heartbeat_with_devices(monkeypatch):
    monkeypatch.setattr(
        heartbeat, "gpu_devices", lambda: [{"index": 0, "name": "H100", "total_mb": 81559, "used_mb": 3}]
    )
    worker = heartbeat.beat("gpu0@box", "gpu")
    first = worker.last_heartbeat
    again = heartbeat.beat("gpu0@box", "gpu")
    assert Worker.objects.count() == 1
    assert again.devices[0]["name"] == "H100" and again.last_heartbeat >= first and not again.is_lost


def test_it_reports_no_gpus_on_a_cpu_host():
    assert isinstance(heartbeat.gpu_devices(), list)  # [] here; NVML's list on a GPU host


def test_it_honours_cuda_visible_devices(monkeypatch):
    # CUDA_VISIBLE_DEVICES and NVML are covered in tests/workers/test_gpus.py.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert gpus.parse_visible("1,3") == [1, 3] and heartbeat.gpu_devices is gpus.gpu_devices


def test_one_worker_publishes_the_queue_table_for_the_fleet_and_another_takes_over_when_it_stops(monkeypatch, settings):
    from datetime import timedelta

    from django.utils import timezone

    from orchestrator.live import events

    published: list[str] = []
    monkeypatch.setattr(events, "publish_queues", lambda table=None: published.append("table"))
    monkeypatch.setattr(heartbeat.QueueTable, "publish_if_changed", _always_publish)
    monkeypatch.setattr(heartbeat, "gpu_devices", lambda: [])
    for name in ("b@h", "a@h", "c@h"):
        heartbeat.beat(name, "cpu")
    assert len(published) == 2  # b (alone then), then a; c is not the first by name: no broker read
    published.clear()
    heartbeat.beat("b@h", "cpu")
    heartbeat.beat("c@h", "cpu")
    assert published == []  # a is alive and publishes for everyone
    stale = timezone.now() - timedelta(seconds=2 * settings.HEARTBEAT_INTERVAL + 1)
    Worker.objects.filter(hostname="a@h").update(last_heartbeat=stale)
    heartbeat.beat("b@h", "cpu")
    heartbeat.beat("c@h", "cpu")
    assert published == ["table"]  # a stopped beating: b, now the first, took over


def test_the_publishing_worker_sends_the_queue_table_only_when_it_changes_and_reads_the_broker_seldom(
    monkeypatch, django_user_model
):
    from orchestrator.fleet import queues
    from orchestrator.live import events
    from tests.conftest import TINY_SPEC

    sent: list[list[dict]] = []
    reads: list[list[str]] = []
    monkeypatch.setattr(events, "publish_queues", lambda table=None: sent.append(table))
    monkeypatch.setattr(queues, "broker_message_counts", lambda names: reads.append(names) or {n: 0 for n in names})
    monkeypatch.setattr(heartbeat, "gpu_devices", lambda: [])
    table = heartbeat.queue_table

    heartbeat.beat("a@h", "cpu")
    assert len(sent) == 1 and len(reads) == 1  # the first table, with the broker's counts
    for _ in range(3):
        heartbeat.beat("a@h", "cpu")
    assert len(sent) == 1 and len(reads) == 1  # nothing changed: nothing sent, no broker connection

    owner = django_user_model.objects.create_user("q")
    new_experiment(owner=owner, name="r", spec=TINY_SPEC, status="queued", queue="cpu")
    heartbeat.beat("a@h", "cpu")
    assert len(sent) == 2 and {q["name"]: q["queued"] for q in sent[-1]}["cpu"] == 1  # a run queued: sent

    assert table.publish_if_changed(table.read_at + heartbeat.BROKER_READ_SECONDS) is False
    assert len(reads) == 2  # the broker is read again once BROKER_READ_SECONDS have passed
