"""The admin shows experiments but makes none: a new experiment is made by create_experiment, which
checks its spec and records its rounds and plugins; the admin would store a spec unchecked."""

import pytest

from orchestrator.experiments.models import Experiment
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment

pytestmark = pytest.mark.django_db


def test_it_refuses_to_add_an_experiment_and_shows_a_spec_read_only(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "root-password")
    client.force_login(admin)
    assert client.get("/admin/orchestrator/experiment/add/").status_code == 403
    refused = client.post("/admin/orchestrator/experiment/add/", {"name": "x", "spec": '{"rounds": -1}'})
    assert refused.status_code == 403 and not Experiment.objects.exists()
    experiment = new_experiment(owner=admin, name="shown", spec=TINY_SPEC)
    page = client.get(f"/admin/orchestrator/experiment/{experiment.pk}/change/").content.decode()
    assert 'name="name"' in page and 'name="spec"' not in page  # shown, not editable
