"""Safe defaults for `make run`: DEBUG off, plain error pages, tracebacks still in the terminal."""

import os
import subprocess
import sys

import pytest
from django.urls import include, path

from scripts.devserver import child_env
from tests import live
from tests.live import ROOT

pytestmark = pytest.mark.django_db


def _boom(request):
    raise RuntimeError("the database caught fire")


urlpatterns = [path("boom/", _boom), path("", include("fedweb.urls"))]


def test_it_runs_make_run_with_debug_off_unless_asked_for():
    assert child_env({"PATH": "/usr/bin"}) == {"PATH": "/usr/bin", "DEBUG": "0"}
    assert child_env({"DEBUG": "1"})["DEBUG"] == "1"  # DEBUG=1 make run


@pytest.mark.parametrize("url", ["/experimnts/", "/share/not-a-token/", "/static/../settings.py", "/api/nothing/"])
def test_it_answers_unknown_urls_with_a_plain_404_that_lists_no_url_patterns(client, settings, url):
    settings.DEBUG = False
    response = client.get(url)
    assert response.status_code == 404
    html = response.content.decode()
    assert "Page not found" in html and "app.css" in html  # the site's own page, in its style
    for leak in ("URLconf", "urlpatterns", "share/&lt;str:token&gt;", "experiments/<int:pk>", "api/schema"):
        assert leak not in html


def test_it_shows_the_plain_404_with_the_site_navigation_to_signed_in_users(client, settings, user):
    settings.DEBUG = False
    client.force_login(user)
    response = client.get("/experimnts/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "Page not found" in html and 'href="/workers/"' in html and "URLconf" not in html


def test_it_shows_a_plain_500(client, settings):
    settings.DEBUG = False
    settings.ROOT_URLCONF = __name__
    client.raise_request_exception = False
    response = client.get("/boom/")
    assert response.status_code == 500
    html = response.content.decode()
    assert "Something went wrong" in html and "fire" not in html and "Traceback" not in html


# A fresh process configured as daphne is (settings from the environment, DEBUG off), so what
# reaches its stderr is what reaches the terminal of `make run`.
SERVER_ERROR_SCRIPT = """
import django
django.setup()
from django.test import Client, override_settings
with override_settings(ROOT_URLCONF="tests.fedweb.test_safe_defaults", ALLOWED_HOSTS=["testserver"]):
    print(Client(raise_request_exception=False).get("/boom/").status_code)
"""


def test_it_logs_a_500s_traceback_to_stderr_with_debug_off(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "fedweb.settings", "DEBUG": "0", "FEDWEB_DATA_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SERVER_ERROR_SCRIPT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.stdout.strip() == "500", done.stderr
    assert "ERROR django.request: Internal Server Error: /boom/" in done.stderr
    assert "Traceback (most recent call last)" in done.stderr
    assert "RuntimeError: the database caught fire" in done.stderr


@pytest.mark.integration
def test_it_serves_static_files_and_plain_404s_through_daphne_with_debug_off(live_env, tmp_path):
    import urllib.error
    import urllib.request

    port = live.free_port()
    server = live.start_daphne({**live_env, "DEBUG": "0"}, tmp_path, port, wait=True)
    try:
        for host in ("127.0.0.1", "localhost"):  # both names `make run` prints or people type
            css = urllib.request.urlopen(f"http://{host}:{port}/static/css/app.css", timeout=10)
            assert css.status == 200 and css.headers["Content-Type"].startswith("text/css")
            assert b"[hidden]" in css.read()
        js = urllib.request.urlopen(f"http://127.0.0.1:{port}/static/js/experiment_detail.js", timeout=10)
        assert js.status == 200 and b"FedWebDashboard" in js.read()
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/experimnts/", timeout=10)
        html = missing.value.read().decode()
        assert missing.value.code == 404 and "Page not found" in html and "URLconf" not in html
    finally:
        server.stop()
