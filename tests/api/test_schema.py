import pytest
import yaml
from drf_spectacular.validation import validate_schema  # jsonschema against the OpenAPI 3 schema

pytestmark = pytest.mark.django_db


def test_it_serves_a_valid_openapi_document(client):
    response = client.get("/api/schema/")
    assert response.status_code == 200
    document = yaml.safe_load(response.content)
    validate_schema(document)
    paths = document["paths"]
    for path in [
        "/api/experiments/",
        "/api/experiments/{id}/",
        "/api/experiments/{id}/start/",
        "/api/experiments/{id}/pause/",
        "/api/experiments/{id}/resume/",
        "/api/experiments/{id}/cancel/",
        "/api/experiments/{id}/rounds/",
        "/api/experiments/{id}/rounds.csv",
        "/api/token/",
    ]:
        assert path in paths, path
    assert set(paths["/api/experiments/"]) >= {"get", "post"}
    assert "tokenAuth" in document["components"]["securitySchemes"]
