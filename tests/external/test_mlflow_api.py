"""The MLflow REST subset in-process: MLflow-shaped refusals for hostile or unsupported calls,
never a 500, and nothing stored by a refused call. (tests/external/test_mlflow_live.py drives it
with the real mlflow client.)"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric, MlflowRun
from tests.external.conftest import user_client

pytestmark = pytest.mark.django_db
BASE = "/api/2.0/mlflow/"


def bearer(client) -> APIClient:
    out = APIClient()
    out.credentials(HTTP_AUTHORIZATION=client._credentials["HTTP_AUTHORIZATION"].replace("Token ", "Bearer "))
    out.user = client.user
    return out


@pytest.fixture
def eve():
    return bearer(user_client("eve"))


@pytest.fixture
def run_id(eve) -> str:
    r = eve.post(BASE + "runs/create", {"experiment_id": "0", "run_name": "r"}, format="json")
    assert r.status_code == 200, r.content
    return r.json()["run"]["info"]["run_id"]


def error(response) -> str:
    assert response.status_code < 500, response.content
    return response.json()["error_code"]


@pytest.mark.parametrize(
    ("method", "path", "says", "status"),
    [
        ("post", "registered-models/create", "not supported", 404),
        ("get", "model-versions/get", "not supported", 404),
        ("post", "runs/search", "not supported", 404),
        ("get", "artifacts/list", "not supported", 404),
        ("post", "no/such/endpoint", "No MLflow endpoint", 404),
    ],
)
def test_unsupported_endpoints_answer_mlflow_errors(eve, method, path, says, status):
    response = getattr(eve, method)(BASE + path, {}, format="json")
    assert (response.status_code, error(response)) == (status, "ENDPOINT_NOT_FOUND")
    assert says in response.json()["message"]
    upload = eve.put("/api/2.0/mlflow-artifacts/artifacts/1/x.txt", b"x", content_type="application/octet-stream")
    assert (upload.status_code, error(upload)) == (404, "ENDPOINT_NOT_FOUND")


def test_a_run_token_writes_its_run_only_and_creates_nothing(eve, run_id):
    other = eve.post(BASE + "runs/create", {"experiment_id": "0"}, format="json").json()["run"]["info"]["run_id"]
    as_token = APIClient()
    as_token.credentials(HTTP_AUTHORIZATION=eve._credentials["HTTP_AUTHORIZATION"].replace("Bearer ", "Token "))
    created = as_token.post("/api/external/runs/", {"name": "via client"}, format="json").json()
    runner = APIClient()
    runner.credentials(HTTP_AUTHORIZATION=f"Bearer {created['token']}")
    ok = runner.post(
        BASE + "runs/log-metric", {"run_id": str(created["id"]), "key": "loss", "value": 1, "step": 1}, format="json"
    )
    assert ok.status_code == 200, ok.content
    for call in (
        runner.post(BASE + "runs/log-metric", {"run_id": other, "key": "loss", "value": 1, "step": 1}, format="json"),
        runner.get(BASE + "runs/get", {"run_id": run_id}),
    ):
        assert error(call) == "RESOURCE_DOES_NOT_EXIST"
    assert error(runner.post(BASE + "experiments/create", {"name": "x"}, format="json")) == "PERMISSION_DENIED"
    assert error(runner.post(BASE + "runs/create", {"experiment_id": "0"}, format="json")) == "PERMISSION_DENIED"


def test_another_users_run_is_not_found_and_native_runs_take_no_writes(eve, run_id):
    mallory = bearer(user_client("mallory"))
    call = mallory.post(
        BASE + "runs/log-metric", {"run_id": run_id, "key": "loss", "value": 1, "step": 1}, format="json"
    )
    assert error(call) == "RESOURCE_DOES_NOT_EXIST"
    assert error(mallory.get(BASE + "experiments/get", {"experiment_id": "1"})) == "RESOURCE_DOES_NOT_EXIST"
    assert not MlflowRun.objects.get(experiment_id=int(run_id)).pending


metric = st.fixed_dictionaries(
    {},
    optional={
        "key": st.one_of(st.text(max_size=80), st.integers(), st.none()),
        "value": st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=5),
            st.none(),
            st.lists(st.integers(), max_size=2),
        ),
        "step": st.one_of(st.integers(min_value=-5, max_value=2 * 10**9), st.text(max_size=5), st.none()),
        "timestamp": st.one_of(st.integers(), st.text(max_size=5)),
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.one_of(
    st.fixed_dictionaries({"metrics": st.one_of(st.lists(metric, max_size=4), st.integers(), st.text(max_size=4))}),
    st.fixed_dictionaries({"params": st.lists(st.dictionaries(st.sampled_from(["key", "value"]), st.one_of(st.text(max_size=9000), st.integers(), st.none())), max_size=3)}),
    st.fixed_dictionaries({"tags": st.one_of(st.lists(st.dictionaries(st.text(max_size=3), st.text(max_size=3)), max_size=3), st.text(max_size=3))}),
    st.lists(st.integers(), max_size=3),
))  # fmt: skip
def test_hostile_batches_get_4xx_mlflow_errors_never_500(eve, run_id, body):
    before = (RoundMetric.objects.count(), CustomMetric.objects.count(), Experiment.objects.get(pk=int(run_id)).spec)
    payload = {"run_id": run_id, **body} if isinstance(body, dict) else body
    # Python's json.dumps, not the test client's renderer: that one refuses to send inf and NaN,
    # which a hostile client sends as Infinity/NaN literals.
    response = eve.post(BASE + "runs/log-batch", json.dumps(payload), content_type="application/json")
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert response.json()["error_code"] in ("INVALID_PARAMETER_VALUE", "MALFORMED_REQUEST")
        after = (RoundMetric.objects.count(), CustomMetric.objects.count(), Experiment.objects.get(pk=int(run_id)).spec)
        assert after == before


def test_a_deeply_nested_body_is_malformed_not_a_crash(eve, run_id):
    deep = "[" * 5000 + "]" * 5000
    response = eve.generic(
        "POST", BASE + "runs/log-batch", f'{{"run_id": "{run_id}", "metrics": {deep}}}', content_type="application/json"
    )
    assert error(response) in ("MALFORMED_REQUEST", "INVALID_PARAMETER_VALUE")
