"""The API says when a run it queued has no live worker to take it (``warnings``), and documents it."""

import pytest
import yaml
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from orchestrator.experiments.models import Experiment
from orchestrator.fleet.workers import Worker
from tests.accounts.world import make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def api():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_world().owner).key}")
    return client


def create(api, device: str, start: bool = True) -> dict:
    body = {"name": "api run", "spec": {"rounds": 3, "compute": {"device": device}}, "start": start}
    response = api.post("/api/experiments/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_it_warns_in_the_create_response_when_no_live_worker_serves_the_queue(api, enqueued):
    Worker.objects.create(hostname="cpu0@box", queue="cpu")  # CPU only: nothing serves gpu
    data = create(api, "cuda:7")
    assert Experiment.objects.get(pk=data["id"]).status == "queued" and len(enqueued) == 1
    assert data["warnings"] == [
        "Queued on 'gpu': waiting for a worker serving gpu. Start one with "
        "`celery -A fedweb worker -Q gpu --concurrency 1`."
    ]


def test_it_warns_of_a_gpu_index_that_no_live_worker_has(api, enqueued):
    Worker.objects.create(hostname="gpu0@box", queue="gpu", devices=[{"index": 0, "name": "H100"}])
    (warning,) = create(api, "cuda:7")["warnings"]
    assert warning.startswith("Queued on 'gpu': no live worker has GPU 7.")
    assert create(api, "cuda:0")["warnings"] == []


def test_it_has_no_warnings_when_a_live_worker_serves_the_queue_or_the_run_is_a_draft(api, enqueued):
    assert create(api, "cpu", start=False)["warnings"] == []
    Worker.objects.create(hostname="cpu0@box", queue="cpu")
    assert create(api, "cpu")["warnings"] == []


def test_it_warns_when_a_draft_is_started_through_the_action(api, enqueued):
    data = create(api, "cpu", start=False)
    response = api.post(f"/api/experiments/{data['id']}/start/")
    assert response.status_code == 200 and "waiting for a worker serving cpu" in response.json()["warnings"][0]


def test_it_documents_the_warnings_in_the_openapi_schema(client):
    document = yaml.safe_load(client.get("/api/schema/").content)
    created = document["paths"]["/api/experiments/"]["post"]["responses"]["201"]["content"]["application/json"]
    schema = document["components"]["schemas"][created["schema"]["$ref"].rsplit("/", 1)[1]]
    warnings = schema["properties"]["warnings"]
    assert warnings["type"] == "array" and warnings["items"]["type"] == "string"
    assert "waiting for a worker serving gpu" in warnings["description"]
