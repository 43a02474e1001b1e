"""Invalid API input: HTTP 400 whose body names the field, and nothing stored (issue 4, item 3)."""

import pytest
from rest_framework.test import APIClient

from orchestrator.experiments.models import Experiment
from tests.accounts.world import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(make_user("alice"))
    return client


CASES = {
    "negative_rounds": ({"rounds": -3}, "rounds", "rounds must be >= 1"),
    "alpha_zero": ({"data": {"partition": "dirichlet", "alpha": 0}}, "data.alpha", "data.alpha must be > 0"),
    "alpha_negative": ({"data": {"alpha": -0.5}}, "data.alpha", "data.alpha must be > 0"),
    "unknown_model": ({"model": {"name": "resnet9000"}}, "model.name", "model.name must be a registered model"),
    "schedule_shorter_than_rounds": (
        {"rounds": 5, "participation": {"schedule": [3, 4]}},
        "participation.schedule",
        "participation.schedule has 2 entries but rounds is 5",
    ),
    "non_numeric_rounds": ({"rounds": "ten"}, "rounds", "rounds must be an integer"),
    "non_numeric_lr": ({"local": {"lr": "fast"}}, "local.lr", "local.lr must be a number"),
    "unknown_field": ({"data": {"colour": "red"}}, "data.colour", "data.colour is not a known field"),
    "spec_not_an_object": ([1, 2], "spec", "spec must be a JSON object"),
    # Old flat option keys the chosen component lacks: refused with its real options (issue 21).
    "old_key_model_lacks": (
        {"model": {"name": "mlp", "width": 1e308}},
        "model.width",
        "model.width is not an option of model 'mlp': its options are hidden",
    ),
    "old_key_dataset_lacks": (
        {"data": {"name": "digits", "path": "../../etc/passwd"}},
        "data.path",
        "data.path is not an option of dataset 'digits': its options are image_size",
    ),
    "unknown_option": (
        {"model": {"name": "mlp", "options": {"width": 3}}},
        "model.options.width",
        "model.options.width is not a known field: model 'mlp' has the options hidden",
    ),
}


@pytest.mark.parametrize("spec,field,message", CASES.values(), ids=CASES.keys())
def test_it_answers_400_naming_the_spec_field_and_stores_nothing(api, spec, field, message, enqueued):
    response = api.post("/api/experiments/", {"name": "bad", "spec": spec, "start": True}, format="json")
    assert response.status_code == 400
    errors = response.json()["spec"]
    assert list(errors) == [field] and errors[field][0].startswith(message)
    assert not Experiment.objects.exists() and enqueued == []


@pytest.mark.parametrize(
    "body,field",
    [
        ({"spec": {}}, "name"),
        ({"name": "x"}, "spec"),
        ({"name": "x", "spec": {}, "visibility": "everyone"}, "visibility"),
        ({"name": "x", "spec": {}, "visibility": "team"}, "visibility"),  # team visibility without a team
        ({"name": "x", "spec": {}, "team": 999}, "team"),
        ({"name": "x", "spec": {}, "tags": "not-a-list"}, "tags"),
        ({"name": "x", "spec": {}, "start": "maybe"}, "start"),
    ],
    ids=["no_name", "no_spec", "bad_visibility", "team_visibility_without_team", "unknown_team", "tags", "start"],
)
def test_it_answers_400_naming_other_fields(api, body, field):
    response = api.post("/api/experiments/", body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not Experiment.objects.exists()


def test_it_answers_400_for_malformed_json(api):
    response = api.post("/api/experiments/", "{not json", content_type="application/json")
    assert response.status_code == 400 and not Experiment.objects.exists()
