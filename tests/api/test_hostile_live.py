"""Hostile input and the login limit against a real daphne server: the ASGI path, not the test client."""

import json
import re
import urllib.error
import urllib.request
from http.cookiejar import CookieJar

import pytest

from orchestrator.experiments.models import Experiment

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _open(opener, url: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers or {}, method="POST" if body else "GET")
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _browser():
    jar = CookieJar()
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar)), jar


def _login(opener, jar, base: str, password: str) -> tuple[int, bytes]:
    _, page = _open(opener, f"{base}/accounts/login/")
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
    body = f"csrfmiddlewaretoken={token}&username=alice&password={password}".encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Referer": f"{base}/accounts/login/"}
    return _open(opener, f"{base}/accounts/login/", body, headers)


def test_it_locks_the_login_page_and_the_token_endpoint_over_asgi(user, daphne, tmp_path):
    base = f"http://{daphne}"
    opener, jar = _browser()
    statuses = [_login(opener, jar, base, "wrong")[0] for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]
    status, page = _login(opener, jar, base, "alice-password")
    assert status == 429 and b"Too many failed login attempts" in page and b'name="password"' in page
    api = urllib.request.build_opener()
    body = json.dumps({"username": "alice", "password": "alice-password"}).encode()
    status, answer = _open(api, f"{base}/api/token/", body, {"Content-Type": "application/json"})
    assert status == 429 and "Too many failed login attempts" in json.loads(answer)["detail"]
    assert "Traceback" not in (tmp_path / "daphne.log").read_text()


def test_it_answers_hostile_bodies_over_asgi_without_a_server_error(user, daphne, tmp_path):
    from rest_framework.authtoken.models import Token

    base = f"http://{daphne}"
    api = urllib.request.build_opener()
    auth = {"Authorization": f"Token {Token.objects.create(user=user).key}", "Content-Type": "application/json"}
    cases = [
        ("[" * 100_000 + "]" * 100_000, 400),
        ('{"name": "x", "spec": {"local": {"lr": 1e400}}}', 400),
        ('{"name": "x", "spec": {"rounds": ' + "9" * 5000 + "}}", 400),
        ('{"name": "' + "x" * 3_000_000 + '", "spec": {}}', 413),
    ]
    for body, expected in cases:
        status, answer = _open(api, f"{base}/api/experiments/", body.encode(), auth)
        assert status == expected, answer[:200]
    opener, jar = _browser()
    _open(opener, f"{base}/accounts/login/")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert _open(opener, f"{base}/teams/", b"name=" + b"x" * 3_000_000, form)[0] == 413
    assert not Experiment.objects.exists()
    log = (tmp_path / "daphne.log").read_text()
    assert "Traceback" not in log and " ERROR " not in log
