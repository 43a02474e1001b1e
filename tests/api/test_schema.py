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


def _schema(client) -> dict:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    document = yaml.safe_load(response.content)
    validate_schema(document)
    return document["components"]["schemas"]


def test_the_spec_schema_documents_each_component_section_from_the_registry(client):
    schemas = _schema(client)
    spec = schemas["ExperimentSpec"]["properties"]
    spec_ref = {"$ref": "#/components/schemas/ExperimentSpec"}
    assert schemas["ExperimentCreate"]["properties"]["spec"]["allOf"] == [spec_ref]
    uplink = spec["communication"]["properties"]["uplink"]["properties"]
    assert uplink["name"]["enum"] == ["fp32", "fp16", "int8", "topk"] and uplink["name"]["default"] == "fp32"
    assert {"$ref": "#/components/schemas/codec.topk.options"} in uplink["options"]["anyOf"]
    ratio = schemas["codec.topk.options"]["properties"]["ratio"]
    assert ratio["type"] == "number" and ratio["exclusiveMinimum"] is True and ratio["maximum"] == 1
    assert spec["data"]["properties"]["alpha"]["description"].endswith("Applies when data.partition is dirichlet.")
    assert spec["algorithm"]["properties"]["name"]["enum"][:2] == ["fedavg", "fedavgm"]
    assert schemas["model.cnn.options"]["properties"] == {}  # a component without options still has its schema


def test_a_loaded_plugins_components_and_options_appear_in_the_schema(client, example_plugin):
    schemas = _schema(client)
    spec = schemas["ExperimentSpec"]["properties"]
    assert "resnet_small" in spec["model"]["properties"]["name"]["enum"]
    assert "stripes" in spec["data"]["properties"]["name"]["enum"]
    assert "fedavg_clipped" in spec["algorithm"]["properties"]["name"]["enum"]
    model = spec["model"]["properties"]
    assert {"$ref": "#/components/schemas/model.resnet_small.options"} in model["options"]["anyOf"]
    resnet = schemas["model.resnet_small.options"]
    assert f"From plugin {example_plugin}." in resnet["description"]
    assert resnet["properties"]["width"] == {
        "type": "integer",
        "description": "Channels of every block.",
        "minimum": 4,
        "maximum": 256,
        "default": 16,
    }
    assert schemas["strategy.fedavg_clipped.options"]["properties"]["max_norm"]["exclusiveMinimum"] is True


def test_the_schema_is_built_when_served_so_a_plugin_loaded_later_appears(client, request):
    assert "model.resnet_small.options" not in _schema(client)
    request.getfixturevalue("example_plugin")  # the server loads a plugin after a first schema request
    schemas = _schema(client)
    assert "resnet_small" in schemas["ExperimentSpec"]["properties"]["model"]["properties"]["name"]["enum"]
    assert "model.resnet_small.options" in schemas
