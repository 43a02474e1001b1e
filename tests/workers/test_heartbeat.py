import pytest

from orchestrator.models import Worker
from workers import gpus, heartbeat

pytestmark = pytest.mark.django_db


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

    from orchestrator import events

    published: list[str] = []
    monkeypatch.setattr(events, "publish_queues", lambda: published.append("table"))
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
