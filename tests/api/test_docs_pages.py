"""Swagger UI (/api/docs/) and Redoc (/api/redoc/) work offline: every script, style sheet and icon
they reference is one of FedWeb's static files, and the ingestion endpoints are in the document."""

import re

import pytest
import yaml
from django.contrib.staticfiles import finders
from drf_spectacular.validation import validate_schema

pytestmark = pytest.mark.django_db

URL_ATTR = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|["'](https?://[^"']+)["']""")


def _references(html: str) -> list[str]:
    return [a or b for a, b in URL_ATTR.findall(html)]


@pytest.mark.parametrize(("page", "bundle"), [("/api/docs/", "swagger-ui-bundle.js"), ("/api/redoc/", "redoc")])
def test_the_api_pages_load_only_local_static_files(client, settings, page, bundle):
    response = client.get(page)
    assert response.status_code == 200
    html = response.content.decode()
    assert "http://" not in html and "https://" not in html, [u for u in _references(html) if "//" in u]
    assets = [
        u for u in _references(html) if u.startswith(settings.STATIC_URL) or u.startswith("/" + settings.STATIC_URL)
    ]
    assert any(bundle in u for u in assets), assets
    for url in assets:
        path = url.split(settings.STATIC_URL, 1)[1]
        assert finders.find(path), f"{page} references {url}, which no static finder has"
    assert "/api/schema/" in html  # the page reads the document from this server


def test_the_navigation_links_the_api_docs(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("nav", password="pw"))
    html = client.get("/").content.decode()
    assert 'href="/api/docs/"' in html


def test_the_ingestion_endpoints_are_described(client):
    document = yaml.safe_load(client.get("/api/schema/").content)
    validate_schema(document)
    paths = document["paths"]
    rounds = paths["/api/external/runs/{id}/rounds/"]["post"]
    assert {"runToken": []} in rounds["security"]
    body = rounds["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    schemas = document["components"]["schemas"]
    item = schemas[body]["properties"]["rounds"]["items"]
    assert set(schemas[item["$ref"].rsplit("/", 1)[1]]["properties"]) == {"round", "metrics"}
    assert {"200", "201", "400", "401", "409", "429"} <= set(rounds["responses"])
    created = paths["/api/external/runs/"]["post"]["responses"]["201"]["content"]["application/json"]["schema"]
    assert "token" in schemas[created["$ref"].rsplit("/", 1)[1]]["properties"]
    for action in ("finish", "fail", "revoke"):
        assert f"/api/external/runs/{{id}}/{action}/" in paths
    assert document["components"]["securitySchemes"]["runToken"]["scheme"] == "bearer"
