"""The login rate limit: LOGIN_FAILURE_LIMIT failures per username and address, then a cool-off."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from rest_framework.authtoken.models import Token

from tests.accounts.world import PASSWORD, make_user

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
LIMIT = 5  # LOGIN_FAILURE_LIMIT's default


@pytest.fixture
def alice():
    return make_user("alice")


def _login(client, password, username="alice", address="10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def _token(client, password, username="alice", address="10.0.0.1"):
    return client.post("/api/token/", {"username": username, "password": password}, REMOTE_ADDR=address)


def _fail(send, client, times, **kw):
    for _ in range(times):
        assert send(client, "wrong", **kw).status_code in (200, 400, 429)  # 429 from the limit-th on


def _signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_it_refuses_the_login_page_after_the_limit_with_an_error_on_the_page(client, alice):
    _fail(_login, client, LIMIT - 1)
    response = _login(client, "wrong")  # the failure that reaches the limit already says so
    assert response.status_code == 429
    response = _login(client, PASSWORD)
    assert response.status_code == 429 and not _signed_in(client)
    page = response.content.decode()
    assert "Too many failed login attempts" in page and "try again in 15 minutes" in page
    assert 'name="password"' in page  # the login form, not a bare error page


def test_it_lets_the_right_password_in_below_the_limit_and_then_forgets_the_failures(client, alice):
    _fail(_login, client, LIMIT - 1)
    assert _login(client, PASSWORD).status_code == 302 and _signed_in(client)
    client.logout()
    _fail(_login, client, LIMIT - 1)  # counted from zero again: still below the limit
    assert _login(client, PASSWORD).status_code == 302 and _signed_in(client)


def test_it_counts_per_username_and_address(client, alice):
    make_user("bob")
    _fail(_login, client, LIMIT)
    assert _login(client, PASSWORD, address="10.0.0.2").status_code == 302  # alice from elsewhere
    client.logout()
    assert _login(client, PASSWORD, username="bob").status_code == 302  # someone else from here


def test_it_lets_the_user_in_again_after_the_cooloff(client, alice, settings):
    _fail(_login, client, LIMIT)
    assert _login(client, PASSWORD).status_code == 429
    # Age the record past LOGIN_COOLOFF_MINUTES rather than wait for it.
    aged = AccessAttempt.objects.get().attempt_time - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    AccessAttempt.objects.update(attempt_time=aged)
    assert _login(client, PASSWORD).status_code == 302 and _signed_in(client)


def test_it_answers_the_token_endpoint_429_in_json_after_the_limit(client, alice):
    _fail(_token, client, LIMIT - 1)
    assert _token(client, PASSWORD).status_code == 200  # below the limit the right password works...
    _fail(_token, client, LIMIT - 1)
    assert _token(client, PASSWORD).status_code == 200  # ... and clears the count, as a page login does
    _fail(_token, client, LIMIT)
    response = _token(client, PASSWORD)
    assert response.status_code == 429 and "Too many failed login attempts" in response.json()["detail"]
    assert "token" not in response.json()


def test_it_shares_one_count_between_the_login_page_and_the_token_endpoint(client, alice):
    _fail(_login, client, LIMIT - 2)
    _fail(_token, client, 2)
    assert _token(client, PASSWORD).status_code == 429
    assert not Token.objects.filter(user=alice).exists()


def test_it_reads_the_limit_and_cooloff_from_the_environment(tmp_path):
    env = {**os.environ, "LOGIN_FAILURE_LIMIT": "2", "LOGIN_COOLOFF_MINUTES": "3", "FEDWEB_DATA_DIR": str(tmp_path)}
    code = "from fedweb import settings as s; print(s.AXES_FAILURE_LIMIT, s.AXES_COOLOFF_TIME.total_seconds())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "180.0"]
