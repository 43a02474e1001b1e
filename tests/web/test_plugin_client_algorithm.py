"""A plugin's client algorithm (issue 19) in the web: the New experiment form offers it with its
options shown for it alone, the API schema lists it, and bad options are refused by their field."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from orchestrator.api.spec_schema import component_options_schemas, spec_schema
from orchestrator.experiments.models import Experiment
from tests.web.conftest import make_experiment
from tests.web.test_form_fields_shown import page_fields

pytestmark = pytest.mark.django_db

SPEC = {
    "rounds": 2,
    "data": {"name": "digits", "num_clients": 6},
    "model": {"name": "logistic"},
    "algorithm": {"name": "fedadam", "client": {"name": "clipped_steps", "options": {"max_norm": 0.5}}},
    "participation": {"clients_per_round": 2},
    "compute": {"device": "cpu"},
}


def test_the_form_offers_the_plugin_client_algorithm_with_its_option_shown_only_for_it(alice_client, example_plugin):
    page = page_fields(alice_client)
    rule = json.loads(page.wrappers["algorithm__client__options__clipped_steps__max_norm"]["data-applies-when"])
    assert rule == [{"algorithm__client__name": ["clipped_steps"]}]
    html = alice_client.get("/experiments/new/").content.decode()
    assert 'value="clipped_steps"' in html and 'value="scaffold"' in html


def test_the_api_schema_lists_the_client_algorithms_and_their_options(example_plugin):
    schemas = component_options_schemas()
    assert schemas["algorithm.clipped_steps.options"]["properties"]["max_norm"]["minimum"] == 0
    assert "From plugin fedweb_plugin_example" in schemas["algorithm.clipped_steps.options"]["description"]
    assert "mu" in schemas["algorithm.fedprox.options"]["properties"]
    client = spec_schema()["properties"]["algorithm"]["properties"]["client"]
    assert "clipped_steps" in client["properties"]["name"]["enum"]


def test_the_api_refuses_bad_client_algorithm_options_by_their_dotted_name_and_stores_nothing(
    user, example_plugin, enqueued
):
    api = APIClient()
    api.force_authenticate(user)
    bad = json.loads(json.dumps(SPEC))
    bad["algorithm"]["client"]["options"]["max_norm"] = 0
    response = api.post("/api/experiments/", {"name": "bad", "spec": bad}, format="json")
    assert response.status_code == 400
    [error] = response.json()["spec"]["algorithm.client.options.max_norm"]
    assert error == "algorithm.client.options.max_norm must be > 0"
    assert not Experiment.objects.exists()
    created = api.post("/api/experiments/", {"name": "ok", "spec": SPEC}, format="json")
    assert created.status_code == 201, created.json()
    stored = Experiment.objects.get(pk=created.json()["id"])
    assert stored.spec["algorithm"]["client"] == {"name": "clipped_steps", "options": {"max_norm": 0.5}}
    assert {(p["kind"], p["name"]) for p in stored.plugins} == {("algorithm", "clipped_steps")}


def test_an_old_fedprox_experiment_loads_displays_and_clones(alice_client, user):
    # Stored before issue 19: FedProx's μ as algorithm.mu, stored as it was written.
    old = make_experiment(user, name="old fedprox", spec={"rounds": 2})
    Experiment.objects.filter(pk=old.pk).update(spec={**old.spec, "algorithm": {"name": "fedprox", "mu": 0.3}})
    assert alice_client.get(f"/experiments/{old.pk}/").status_code == 200
    initial = alice_client.get(f"/experiments/new/?clone={old.pk}").context["form"].initial
    assert initial["algorithm__client__name"] == "fedprox"
    assert initial["algorithm__client__options__fedprox__mu"] == 0.3
