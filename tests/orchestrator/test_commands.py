import json

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from orchestrator.experiments.models import Experiment, Status
from tests.conftest import TINY_SPEC

pytestmark = pytest.mark.django_db


def test_it_runs_an_experiment_inline_from_a_spec_file(tmp_path, capsys):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({**TINY_SPEC, "rounds": 3}))
    call_command("run_experiment", str(path), "--inline", "--name", "headless", "--user", "carol")
    e = Experiment.objects.get(name="headless")
    assert e.status == Status.COMPLETED and e.owner.username == "carol" and e.rounds.count() == 3
    out = capsys.readouterr().out
    assert "round    3" in out and "completed after 3 rounds" in out


def test_it_queues_an_experiment_for_the_workers(tmp_path, enqueued):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY_SPEC))
    call_command("run_experiment", str(path))
    e = Experiment.objects.get()
    assert e.status == Status.QUEUED and enqueued == [((e.pk, 1), {"queue": "cpu"})]


def test_it_rejects_an_invalid_spec_naming_the_field(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"data": {"alpha": 0}}))
    with pytest.raises(CommandError, match="data.alpha"):
        call_command("run_experiment", str(path), "--inline")
    assert not Experiment.objects.exists()


def test_it_refuses_an_old_key_the_component_lacks_naming_its_options(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"rounds": 1, "model": {"name": "mlp", "width": 1e308}}))

    with pytest.raises(CommandError, match="model.width is not an option of model 'mlp': its options are hidden"):
        call_command("run_experiment", str(path), "--inline")
    assert not Experiment.objects.exists()


def test_it_refuses_a_spec_over_the_server_s_limits_and_leaves_nothing_behind(tmp_path, settings, enqueued):
    settings.FEDWEB_MAX_CLIENTS = 10
    path = tmp_path / "big.json"
    path.write_text(json.dumps(TINY_SPEC))  # 20 clients
    with pytest.raises(CommandError, match=r"big.json: data.num_clients .*\(FEDWEB_MAX_CLIENTS\)"):
        call_command("run_experiment", str(path), "--user", "dora")
    assert not Experiment.objects.exists() and enqueued == []
    assert not get_user_model().objects.filter(username="dora").exists()


@pytest.mark.slow
def test_it_creates_the_demo_once(enqueued, monkeypatch):
    from orchestrator.management.commands import demo

    small = {"rounds": 2, "data": {"num_clients": 20, "image_size": 8}, "model": {"name": "mlp", "hidden": 8}}
    monkeypatch.setattr(demo, "FINISHED_DEMOS", {"quickstart": {**small, "participation": {"clients_per_round": 2}}})
    call_command("demo")
    call_command("demo")
    user = get_user_model().objects.get(username="demo")
    assert user.check_password("demo")
    statuses = sorted(Experiment.objects.filter(owner=user).values_list("status", flat=True))
    assert statuses == ["completed", "queued"]
    assert len(enqueued) == 1
