"""The API token: made, rotated and revoked from the token page or the API; an old key dies at once."""

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.accounts.world import PASSWORD, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return make_user("alice")


@pytest.fixture
def page(client, alice):
    client.force_login(alice)
    return client


def _with_key(key: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return api


def _works(key: str) -> bool:
    status = _with_key(key).get("/api/experiments/").status_code
    assert status in (200, 401)
    return status == 200


def _shown(client) -> Token | None:
    return client.get(reverse("api_token")).context["token"]


def test_it_shows_no_token_until_one_is_made_then_the_same_one(page, alice):
    response = page.get(reverse("api_token"))
    assert response.context["token"] is None and b"You have no API token" in response.content
    assert not Token.objects.filter(user=alice).exists()  # looking does not make one
    page.post(reverse("api_token"), {"action": "rotate"})
    first = _shown(page).key
    assert _shown(page).key == first and _works(first)


def test_it_rotates_from_the_page_and_the_old_key_stops_at_once(page, alice):
    old = Token.objects.create(user=alice).key
    response = page.post(reverse("api_token"), {"action": "rotate"})
    assert response.status_code == 302
    new = _shown(page).key
    assert new != old and _works(new) and not _works(old)


def test_it_revokes_from_the_page_until_a_new_one_is_made(page, alice):
    old = Token.objects.create(user=alice).key
    page.post(reverse("api_token"), {"action": "revoke"})
    assert _shown(page) is None and not _works(old)
    assert not Token.objects.filter(user=alice).exists()
    page.post(reverse("api_token"), {"action": "rotate"})
    assert _works(_shown(page).key)


def test_it_changes_tokens_only_by_post_with_csrf(alice):
    from django.test import Client

    key = Token.objects.create(user=alice).key
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(reverse("api_token"), {"action": "revoke"}).status_code == 403
    assert client.get(reverse("api_token"), {"action": "revoke"}).status_code == 200
    assert client.post(reverse("api_token"), {"action": "explode"}).status_code == 403  # CSRF first
    assert _works(key)


def test_it_answers_400_to_an_unknown_action_and_keeps_the_token(page, alice):
    key = Token.objects.create(user=alice).key
    assert page.post(reverse("api_token"), {"action": "explode"}).status_code == 400
    assert _works(key)


def test_it_sends_anonymous_visitors_to_log_in(client):
    assert client.get(reverse("api_token")).status_code == 302
    assert client.post(reverse("api_token"), {"action": "revoke"}).status_code == 302


def test_it_rotates_through_the_api_with_the_current_token(alice):
    old = Token.objects.create(user=alice).key
    response = _with_key(old).post("/api/token/rotate/")
    assert response.status_code == 200
    new = response.json()["token"]
    assert new != old and _works(new) and not _works(old)
    assert _with_key(old).post("/api/token/rotate/").status_code == 401


def test_it_revokes_through_the_api_and_a_new_login_makes_another(client, alice):
    old = Token.objects.create(user=alice).key
    assert _with_key(old).delete("/api/token/").status_code == 204
    assert not _works(old) and not Token.objects.filter(user=alice).exists()
    assert _with_key(old).delete("/api/token/").status_code == 401
    response = client.post("/api/token/", {"username": "alice", "password": PASSWORD})
    assert response.status_code == 200 and _works(response.json()["token"])


def test_it_refuses_token_changes_without_credentials(alice):
    key = Token.objects.create(user=alice).key
    api = APIClient()
    assert api.delete("/api/token/").status_code == 401
    assert api.post("/api/token/rotate/").status_code == 401
    assert _works(key)


def test_it_requires_csrf_for_token_changes_over_a_session(alice):
    key = Token.objects.create(user=alice).key
    api = APIClient(enforce_csrf_checks=True)
    api.force_login(alice)
    assert api.delete("/api/token/").status_code == 403
    assert api.post("/api/token/rotate/").status_code == 403
    assert _works(key)


def test_it_describes_the_token_endpoints_in_the_schema(client):
    import yaml

    paths = yaml.safe_load(client.get("/api/schema/").content)["paths"]
    assert {"post", "delete"} <= set(paths["/api/token/"]) and "post" in paths["/api/token/rotate/"]
