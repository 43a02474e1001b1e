"""A spec naming the example plugin's components by name, through the API as a script sends it."""

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from orchestrator.experiments.models import Experiment

pytestmark = pytest.mark.django_db

PLUGIN_SPEC = {
    "rounds": 2,
    "model": {"name": "resnet_small", "options": {"width": 4, "blocks": 1}},
    "data": {"name": "stripes", "options": {"num_samples": 200, "side": 8}, "num_clients": 4, "partition": "iid"},
    "algorithm": {"name": "fedavg_clipped", "options": {"max_norm": 0.5}},
    "participation": {"clients_per_round": 2},
    "compute": {"device": "cpu"},
}


@pytest.fixture
def api(user):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def _post(api, spec):
    return api.post("/api/experiments/", {"name": "plugin run", "spec": spec}, format="json")


def test_a_spec_naming_plugin_components_creates_the_experiment_and_records_the_plugin(api, example_plugin):
    response = _post(api, PLUGIN_SPEC)
    assert response.status_code == 201, response.json()
    body = response.json()
    spec = Experiment.objects.get(pk=body["id"]).spec
    assert spec["model"] == {"name": "resnet_small", "options": {"width": 4, "blocks": 1}}
    assert spec["data"]["name"] == "stripes" and spec["data"]["options"]["num_samples"] == 200
    assert spec["data"]["options"]["noise"] == 0.3  # the plugin's own default filled in
    assert spec["algorithm"]["name"] == "fedavg_clipped" and spec["algorithm"]["options"] == {"max_norm": 0.5}
    recorded = Experiment.objects.get(pk=body["id"]).plugins
    assert {(p["kind"], p["name"], p["plugin"]) for p in recorded} == {
        ("model", "resnet_small", example_plugin),
        ("dataset", "stripes", example_plugin),
        ("strategy", "fedavg_clipped", example_plugin),
    }
    assert all(p["hash"] for p in recorded)
    assert body["plugins"] == recorded  # what the experiment needs of a worker, shown to API users too


@pytest.mark.parametrize(
    ("section", "value", "field", "message"),
    [
        ("model", {"name": "resnet_small", "options": {"width": 0}}, "model.options.width", ">= 4"),
        ("model", {"name": "resnet_small", "options": {"depth": 3}}, "model.options.depth", "not a known field"),
        ("data", {"name": "stripes", "options": {"num_classes": 1}}, "data.options.num_classes", ">= 2"),
        ("algorithm", {"name": "fedavg_clipped", "options": {"max_norm": 0}}, "algorithm.options.max_norm", "> 0"),
    ],
)
def test_bad_plugin_options_give_400_naming_the_field_and_store_nothing(
    api, example_plugin, section, value, field, message
):
    spec = {**PLUGIN_SPEC, section: {**PLUGIN_SPEC[section], **value}}
    response = _post(api, spec)
    assert response.status_code == 400
    [error] = response.json()["spec"][field]
    assert error.startswith(field) and message in error, error
    assert not Experiment.objects.exists()


def test_without_the_plugin_its_components_are_unknown_names(api):
    response = _post(api, {**PLUGIN_SPEC, "data": {"name": "digits"}, "algorithm": {"name": "fedavg"}})
    assert response.status_code == 400
    assert response.json()["spec"]["model.name"][0].startswith("model.name must be a registered model")
    assert not Experiment.objects.exists()
