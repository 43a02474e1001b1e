"""In real Chromium: Cancel asks before it ends a run for good, the dashboard says what Elapsed counts
and what the run keeps on disk, and the API reference pages send no request off the machine and lead
back to the app."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest

from orchestrator.models import Experiment
from tests.browser.conftest import log_in
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def test_cancel_asks_first_and_the_dashboard_says_what_it_counts(page, alice, daphne):
    e = new_experiment(owner=alice, name="queued, no worker", spec=TINY_SPEC)
    e.start()
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/{e.pk}/")
    assert "pauses included" in page.inner_text(".status-line") and page.is_visible("#st-training")
    assert page.inner_text("#disk-use").startswith("On disk: 0")

    page.click("#btn-cancel")  # one click does not end it: the page asks
    page.wait_for_selector("#confirm-cancel")
    assert "cannot be resumed" in page.inner_text("main")
    assert Experiment.objects.get(pk=e.pk).status == "queued"
    page.click("#keep-running")
    page.wait_for_url(f"{base}/experiments/{e.pk}/")
    assert Experiment.objects.get(pk=e.pk).status == "queued"

    page.click("#btn-cancel")
    page.click("#confirm-cancel")
    page.wait_for_url(f"{base}/experiments/{e.pk}/")
    page.wait_for_function("() => document.getElementById('status-badge').textContent === 'cancelled'")
    assert Experiment.objects.get(pk=e.pk).status == "cancelled"
    assert page.errors == []


def test_the_api_reference_pages_stay_on_the_machine_and_lead_back(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    requested: list[str] = []
    refused: dict[str, str] = {}
    page.on("request", lambda r: requested.append(r.url))
    page.on("requestfailed", lambda r: refused.update({r.url: r.failure}))

    page.goto(f"{base}/api/redoc/")
    page.wait_for_selector("text=External runs", timeout=60_000)  # Redoc drew the document, sidebar included
    page.wait_for_function("() => document.querySelector('[role=menu]') !== null")
    page.goto(f"{base}/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title", timeout=60_000)

    # Redoc's bundle asks cdn.redoc.ly for its logo: the page's policy refuses it in the browser, so it
    # is never sent ("csp"; without the policy it goes out, and fails here only for want of a network).
    away = [u for u in requested if urlparse(u).scheme in ("http", "https") and urlparse(u).hostname != "127.0.0.1"]
    assert {u: refused.get(u) for u in away} == {u: "csp" for u in away}
    page.click("#back-to-app")
    page.wait_for_url(f"{base}/")
    assert page.is_visible("#experiments")
