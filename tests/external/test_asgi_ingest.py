"""Reports through the ASGI application daphne serves (``fedweb.asgi``), not the test client's
handler: the middleware chain and the view run in one thread there, and the run token's scope, the
security headers, the CSRF check and the refusals are what they are everywhere else."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator

from fedweb.asgi import application
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric

pytestmark = pytest.mark.django_db(transaction=True)

ROUND = {"round": 1, "metrics": {"loss": 0.5, "accuracy": 0.8, "grad/norm": 1.5}}


def _post(path: str, body, authorization: str = "") -> dict:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = [(b"host", b"localhost"), (b"content-type", b"application/json"), (b"content-length", b"%d" % len(raw))]
    if authorization:
        headers.append((b"authorization", authorization.encode()))
    communicator = HttpCommunicator(application, "POST", path, body=raw, headers=headers)
    response = async_to_sync(communicator.get_response)(timeout=10)
    response["headers"] = {k.decode().lower(): v.decode() for k, v in response["headers"]}
    return response


@pytest.fixture
def token(alice) -> tuple[int, str]:
    r = alice.post("/api/external/runs/", {"name": "ext"}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["id"], r.json()["token"]


def test_it_records_a_report_with_the_security_headers(token):
    pk, run_token = token
    response = _post(f"/api/external/runs/{pk}/rounds/", {"rounds": [ROUND]}, f"Bearer {run_token}")
    assert response["status"] == 201, response["body"]
    assert json.loads(response["body"]) == {"recorded": [1], "duplicates": []}
    assert RoundMetric.objects.get(experiment_id=pk, round=1).train_loss == 0.5
    assert CustomMetric.objects.get(experiment_id=pk, round=1).values == {"grad/norm": 1.5}
    headers = response["headers"]
    assert (headers["x-frame-options"], headers["x-content-type-options"]) == ("DENY", "nosniff")
    # a resend is answered, stored once
    again = _post(f"/api/external/runs/{pk}/rounds/", {"rounds": [ROUND]}, f"Bearer {run_token}")
    assert (again["status"], json.loads(again["body"])) == (200, {"recorded": [], "duplicates": [1]})
    assert RoundMetric.objects.filter(experiment_id=pk).count() == 1


def test_it_refuses_bad_tokens_other_runs_and_hostile_bodies_storing_nothing(token, alice):
    pk, run_token = token
    other = alice.post("/api/external/runs/", {"name": "other"}, format="json").json()["id"]
    path = f"/api/external/runs/{pk}/rounds/"
    assert _post(path, {"rounds": [ROUND]})["status"] == 401
    assert _post(path, {"rounds": [ROUND]}, "Bearer frt_not-a-token")["status"] == 401
    assert _post(path, {"rounds": [ROUND]}, f"Token {run_token}")["status"] == 401  # not a user token
    assert _post(f"/api/external/runs/{other}/rounds/", {"rounds": [ROUND]}, f"Bearer {run_token}")["status"] == 404
    assert _post(path, b'{"rounds": [', f"Bearer {run_token}")["status"] == 400
    nan = {"rounds": [{"round": 1, "metrics": {"loss": float("nan")}}]}
    assert _post(path, json.dumps(nan).encode(), f"Bearer {run_token}")["status"] == 400
    assert not RoundMetric.objects.filter(experiment__in=[pk, other]).exists()
    assert Experiment.objects.get(pk=pk).current_round == 0


def test_it_still_checks_csrf_on_a_form_post():
    response = _post("/accounts/login/", b"username=a&password=b")
    assert response["status"] == 403  # no CSRF cookie or token: CsrfViewMiddleware refused it
