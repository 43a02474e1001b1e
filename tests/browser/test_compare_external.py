"""An external run (reported over the ingestion API) beside a native run on the compare page, in
real Chromium against real daphne: both in the charts and the legend, their configs in the spec diff."""

from __future__ import annotations

import json
import urllib.request

import pytest
from rest_framework.authtoken.models import Token

from orchestrator.experiments.models import Experiment, Kind
from orchestrator.sweeps.stats import run_labels
from tests.browser.conftest import log_in, screenshot, trace_xs
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

NATIVE_SPEC = {"rounds": 6, "algorithm": {"name": "fedavg"}, "local": {"epochs": 1, "lr": 0.05}}
# What a Flower script might send as its config: some fields shared with the native spec, some its own.
EXTERNAL_CONFIG = {
    "rounds": 5,
    "algorithm": {"name": "fedavg"},
    "local": {"epochs": 2, "lr": 0.1},
    "framework": "flower",
}


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def flower_round(r: int) -> dict:
    """What FedWebStrategy reports for a Flower round (standard names), plus a custom metric."""
    standard = {"loss": 1.2 / r, "accuracy": 0.5 + 0.08 * r, "participants": 4, "completed": 4}
    return {
        **standard,
        "bytes_up": 9000,
        "bytes_down": 9000,
        "round_seconds": 0.4,
        "memory_mb": 350.0,
        "grad/norm": 3 / r,
    }


def _post(url: str, body: dict, auth: str) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": auth},
    )  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def report_external_run(base: str, user) -> Experiment:
    """An external run made as a script makes one: created with the user's API token, five rounds
    reported with the run token (standard names and a custom one), then finished."""
    key = Token.objects.create(user=user).key
    created = _post(f"{base}/api/external/runs/", {"name": "flower run", "config": EXTERNAL_CONFIG}, f"Token {key}")
    bearer = f"Bearer {created['token']}"
    rounds = [{"round": r, "metrics": flower_round(r)} for r in range(1, 6)]
    _post(f"{base}/api/external/runs/{created['id']}/rounds/", {"rounds": rounds}, bearer)
    _post(f"{base}/api/external/runs/{created['id']}/finish/", {}, bearer)
    return Experiment.objects.get(pk=created["id"])


def test_it_compares_an_external_run_with_a_native_one(page, alice, daphne, artifacts):
    base = f"http://{daphne}"
    native = make_experiment(alice, rounds=6, name="native run", spec=NATIVE_SPEC, status="completed")
    external = report_external_run(base, alice)
    assert (external.kind, external.status, external.current_round) == (Kind.EXTERNAL, "completed", 5)

    log_in(page, base, "alice", "alice-password")
    # Pick both on the list and press "Compare selected", as a user would.
    page.check(f'input.pick[value="{native.pk}"]')
    page.check(f'input.pick[value="{external.pk}"]')
    page.click("#compare")
    page.wait_for_url("**/compare/?ids=*")
    page.wait_for_function("() => (document.getElementById('cmp-accuracy').data || []).length === 2")

    labels = run_labels([native, external])
    names = page.evaluate("() => document.getElementById('cmp-accuracy').data.map(t => t.name)")
    assert sorted(names) == sorted(labels)
    # Each legend item: its swatch, its label, then its "to target" figures (test accuracy 0.8 by default).
    legend = page.locator("#chart-legend .legend-item").evaluate_all(
        "els => els.map(e => e.childNodes[1].textContent.trim())"
    )
    assert sorted(legend) == sorted(labels)
    assert page.locator("#chart-legend .legend-item .to-target").count() == 2
    assert sorted(len(x) for x in trace_xs(page, "cmp-accuracy")) == [5, 6]  # the external run's 5 rounds
    external_y = page.evaluate(
        "(n) => document.getElementById('cmp-accuracy').data.find(t => t.name === n).y", labels[1]
    )  # fmt: skip
    assert external_y == pytest.approx([0.5 + 0.08 * r for r in range(1, 6)])
    for chart in ("cmp-loss", "cmp-bandwidth"):
        assert page.locator(f"#{chart} .main-svg").count() > 0
    # The spec diff reads the external run's config as it reads a native spec.
    differences = page.text_content("#differences")
    for key in ("framework", "local.epochs", "local.lr", "rounds"):
        assert key in differences, (key, differences)
    assert "algorithm.name" not in differences  # the same in both
    assert page.errors == []
    # The table, the legend and the first two rows of charts (the spec diff below runs long: every
    # default of the native spec differs from a config that does not name it).
    page.set_viewport_size({"width": 1360, "height": 1250})
    screenshot(page, artifacts, "compare-external.png")
