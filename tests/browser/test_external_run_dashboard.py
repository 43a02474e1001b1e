"""An external run's dashboard in real Chromium, while a script reports it: a metric named grad/norm is
charted under that name with its legend, the ETA halfway is an estimate and not "0s", charts the
script reports nothing for are hidden and named (and appear with their first value), the Worker is
"external" live and after a reload, and nothing offers to pause or prioritise what a script drives."""

from __future__ import annotations

import json
import urllib.request

import pytest
from rest_framework.authtoken.models import Token

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

TOTAL = 30


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _post(url: str, body: dict, auth: str) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": auth},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def _report(base: str, run: dict, numbers, **extra) -> None:
    """What a plain PyTorch script's client sends: a loss, an accuracy and a gradient norm, no round time."""
    rounds = [
        {"round": r, "metrics": {"loss": 2 / r, "accuracy": r / TOTAL, "grad/norm": 1 / r, **extra}} for r in numbers
    ]
    _post(f"{base}/api/external/runs/{run['id']}/rounds/", {"rounds": rounds}, f"Bearer {run['token']}")


def test_an_external_runs_dashboard_says_what_the_script_reported(page, alice, daphne):
    base = f"http://{daphne}"
    key = Token.objects.create(user=alice).key
    body = {"name": "plain pytorch", "config": {"rounds": TOTAL}, "total_rounds": TOTAL}
    run = _post(f"{base}/api/external/runs/", body, f"Token {key}")
    _report(base, run, range(1, 16))  # round 15 of 30

    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/{run['id']}/")
    page.wait_for_function("() => document.querySelectorAll('#custom-grad .legendtext').length > 0")
    assert page.inner_text("#custom-metrics + .charts h3") == "grad/norm"  # not "grad"
    assert page.evaluate(
        "() => [...document.querySelectorAll('#custom-grad .legendtext')].map(t => t.textContent)"
    ) == ["grad/norm"]
    eta = page.text_content("#st-eta")
    assert eta.startswith("≈") and eta != "0s", eta  # from the wall clock per round: no round time was reported
    hidden = page.evaluate("() => [...document.querySelectorAll('.chart-panel[hidden]')].map(p => p.dataset.title)")
    assert set(hidden) == {"Memory per round", "Bandwidth", "Round time and throughput", "Participants per round"}
    assert "Not reported by this run so far: Memory per round" in page.inner_text("#charts-unreported")
    assert page.text_content("#st-worker") == "external"
    assert page.locator("#btn-pause, #btn-resume, #id_priority").count() == 0
    assert page.locator("#rounds-table tbody tr").first.locator("td").last.inner_text() == "external"

    # A round arrives live with bytes: the bandwidth chart appears, its row names the same worker.
    _report(base, run, [16], bytes_up=5000, bytes_down=5000)
    page.wait_for_function("() => document.getElementById('st-round').textContent === '16'")
    page.wait_for_function("() => !document.getElementById('chart-bandwidth').closest('.chart-panel').hidden")
    assert "Bandwidth" not in page.inner_text("#charts-unreported")
    assert page.locator("#rounds-table tbody tr").first.locator("td").last.inner_text() == "external"
    page.reload()
    assert page.locator("#rounds-table tbody tr").first.locator("td").last.inner_text() == "external"
    assert page.text_content("#st-worker") == "external"
    assert page.errors == []
