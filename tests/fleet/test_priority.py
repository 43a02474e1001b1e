"""The priority the `priority` policy orders by: set by those who may control the experiment, from
the dashboard's form or the API; a bad value is a field error and changes nothing. Also the
FEDWEB_POLICY setting's reader."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from rest_framework.test import APIClient

from fedweb import env
from orchestrator.experiments.models import Experiment
from orchestrator.fleet.policies import POLICIES
from tests.accounts.world import fast_password_hashing, make_world  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _priority(world) -> int:
    return Experiment.objects.get(pk=world.experiment.pk).priority


def test_it_lets_a_team_member_set_the_priority_through_the_api(world):
    response = _api(world.member).post(f"/api/experiments/{world.experiment.pk}/priority/", {"priority": 7}, "json")
    assert response.status_code == 200 and response.json() == {"id": world.experiment.pk, "priority": 7}
    assert _priority(world) == 7
    assert world.experiment.log_entries.filter(message="Priority set to 7 by mia").exists()
    detail = _api(world.member).get(f"/api/experiments/{world.experiment.pk}/").json()
    assert detail["priority"] == 7


@pytest.mark.parametrize("bad", ["high", 1001, -1001, 2.5, None, True, "", "1e3"])
def test_it_refuses_a_bad_priority_with_a_field_error_and_keeps_the_old_one(world, bad):
    url = f"/api/experiments/{world.experiment.pk}/priority/"
    response = _api(world.owner).post(url, {"priority": bad}, "json")
    assert response.status_code == 400
    assert response.json() == {"priority": ["priority must be a whole number between -1000 and 1000"]}
    assert _priority(world) == 0


def test_it_forbids_a_viewer_and_hides_the_experiment_from_others(world):
    url = f"/api/experiments/{world.experiment.pk}/priority/"
    assert _api(world.viewer).post(url, {"priority": 3}, "json").status_code == 403
    assert _api(world.other).post(url, {"priority": 3}, "json").status_code == 404
    assert APIClient().post(url, {"priority": 3}, "json").status_code == 401
    assert _priority(world) == 0


def test_it_sets_the_priority_from_the_dashboard_form(world):
    client = Client()
    client.force_login(world.owner)
    url = f"/experiments/{world.experiment.pk}/priority/"
    assert client.post(url, {"priority": "-4"}).status_code == 302
    assert _priority(world) == -4
    page = client.post(url, {"priority": "soon"}, follow=True).content.decode()
    assert "priority must be a whole number between -1000 and 1000" in page and _priority(world) == -4
    assert 'name="priority"' in client.get(f"/experiments/{world.experiment.pk}/").content.decode()


def test_it_reads_the_policy_of_each_queue_and_names_the_setting_on_a_typo(monkeypatch):
    monkeypatch.setenv("FEDWEB_POLICY", "cpu=srtf, gpu=pack")
    assert env.env_choices("FEDWEB_POLICY", POLICIES) == {"cpu": "srtf", "gpu": "pack"}
    monkeypatch.setenv("FEDWEB_POLICY", "cpu=fastest")
    with pytest.raises(ImproperlyConfigured, match="FEDWEB_POLICY: 'cpu' must be one of fifo, priority"):
        env.env_choices("FEDWEB_POLICY", POLICIES)
    monkeypatch.setenv("FEDWEB_POLICY", "srtf")
    with pytest.raises(ImproperlyConfigured, match="FEDWEB_POLICY must be comma-separated name=value pairs"):
        env.env_choices("FEDWEB_POLICY", POLICIES)
    monkeypatch.delenv("FEDWEB_POLICY")
    assert env.env_choices("FEDWEB_POLICY", POLICIES) == {}
