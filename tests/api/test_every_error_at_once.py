"""Every bad field of a submission is reported on the first submit, beside its field: the engine, the
experiment API, the sweep API, the New experiment form and the New sweep form. Nothing is stored."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from rest_framework.test import APIClient

from fedweb_engine.spec.schema import Spec, SpecError, each_error
from orchestrator.models import Experiment, Sweep
from tests.accounts.world import make_user
from tests.conftest import TINY_SPEC
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db

# Three fields out of range at once, as a newcomer typed them: 10⁸ rounds, no clients, a negative rate.
THREE_BAD = {"rounds": 10**8, "participation": {"clients_per_round": 0}, "local": {"lr": -0.1}}
BAD_FIELDS = {"rounds", "participation.clients_per_round", "local.lr"}
FORM_FIELDS = {"rounds": "100000000", "participation__clients_per_round": "0", "local__lr": "-0.1"}


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.fixture
def browser_client(alice):
    client = Client()
    client.force_login(alice)
    return client


def test_it_reports_every_bad_field_of_a_spec_at_once():
    with pytest.raises(SpecError) as e:
        Spec.from_dict({**TINY_SPEC, **THREE_BAD, "data": {"alpha": 0}, "model": {"name": "nope", "hidden": 3}})

    fields = [one.field for one in each_error(e.value)]
    assert set(fields) == BAD_FIELDS | {"data.alpha", "model.name"}
    assert "rounds must be <= 1000000" in str(e.value) and "local.lr must be > 0" in str(e.value)


def test_it_reports_every_broken_rule_between_fields_at_once():
    spec = {"data": {"num_clients": 5, "client_test_fraction": 0.2}, "participation": {"clients_per_round": 6}, "compute": {"device": "tpu"},
            "evaluation": {"clients": "cohort", "cohort_size": 50}, "rounds": 3}  # fmt: skip
    with pytest.raises(SpecError) as e:
        Spec.from_dict(spec)

    fields = {one.field for one in each_error(e.value)}
    assert {"participation.clients_per_round", "compute.device", "evaluation.cohort_size"} <= fields


def test_it_bounds_the_errors_of_a_hostile_body():
    with pytest.raises(SpecError) as e:
        Spec.from_dict({f"key{i}": i for i in range(10_000)})

    assert 1 < len(each_error(e.value)) <= 50


def test_it_answers_the_api_with_every_bad_field_in_one_400(api):
    response = api.post("/api/experiments/", {"name": "", "spec": {**TINY_SPEC, **THREE_BAD}}, format="json")

    assert response.status_code == 400
    assert set(response.json()["spec"]) == BAD_FIELDS
    assert "name" in response.json()  # and the other fields' errors in the same answer
    assert not Experiment.objects.exists()


def test_it_answers_the_sweep_api_with_every_bad_field_in_one_400(api):
    body = {"name": "s", "spec": {**TINY_SPEC, **THREE_BAD}, "axes": {"seed": [0, 1]}}
    response = api.post("/api/sweeps/", body, format="json")

    assert response.status_code == 400
    assert {key.removeprefix("spec.") for key in response.json()} == BAD_FIELDS
    assert not Sweep.objects.exists() and not Experiment.objects.exists()


def test_it_shows_every_bad_field_of_the_form_beside_it(browser_client):
    response = browser_client.post("/experiments/new/", form_data(**FORM_FIELDS, name=""))

    errors = response.context["form"].errors
    assert set(errors) == {"name", *FORM_FIELDS}
    assert "rounds must be <=" in errors["rounds"][0] and "local.lr must be > 0" in errors["local__lr"][0]
    assert not Experiment.objects.exists()


def test_it_judges_the_spec_even_when_an_input_does_not_parse(browser_client):
    response = browser_client.post("/experiments/new/", form_data(**FORM_FIELDS, data__alpha="lots"))

    assert set(response.context["form"].errors) == {"data__alpha", *FORM_FIELDS}


def test_it_shows_every_bad_field_of_the_sweep_form_beside_it(browser_client):
    sweep = {"axes": "seed: 0, 1", "mode": "grid", "sample_seed": "0", "seeds": ""}
    response = browser_client.post("/sweeps/new/", {**form_data(**FORM_FIELDS), **sweep})

    errors = response.context["form"].errors
    assert set(errors) == set(FORM_FIELDS)
    assert not Sweep.objects.exists()


def test_it_shows_the_base_fields_errors_even_when_the_axes_do_not_parse(browser_client):
    sweep = {"axes": "no colon here", "mode": "grid", "sample_seed": "0"}
    response = browser_client.post("/sweeps/new/", {**form_data(**FORM_FIELDS), **sweep})

    assert set(response.context["form"].errors) == {"axes", *FORM_FIELDS}


def test_it_lists_every_bad_field_of_a_json_base_spec(browser_client):
    sweep = {"axes": "seed: 0", "mode": "grid", "sample_seed": "0", "base_spec": json.dumps({**TINY_SPEC, **THREE_BAD})}
    response = browser_client.post("/sweeps/new/", {**form_data(), **sweep})

    messages = " ".join(response.context["form"].errors["base_spec"])
    assert all(field in messages for field in BAD_FIELDS), messages
