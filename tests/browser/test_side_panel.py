"""The new-experiment form's side panel in real Chromium (issue 21): each box shows its own figures
or why it has none; an error goes to the boxes that read its field, and no box keeps stale numbers."""

from __future__ import annotations

import pytest

from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _text(page, element_id: str) -> str:
    return page.evaluate(f"() => document.getElementById('{element_id}').textContent")


def test_it_puts_each_error_in_the_boxes_that_read_its_field(page, alice, daphne, artifacts):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/?preset=quickstart")
    page.wait_for_function("() => document.getElementById('bw-total').textContent.includes('B')")
    page.wait_for_function("() => document.getElementById('res-params').textContent !== '–'")
    # The DP projection is a box of its own, not a line of the bandwidth estimate.
    assert page.locator("#bandwidth-preview #dp-epsilon").count() == 0
    assert page.locator("#privacy-preview #dp-epsilon").count() == 1
    page.wait_for_function("() => document.getElementById('dp-epsilon').textContent.startsWith('no DP')")

    page.fill("#id_rounds", "0")
    page.wait_for_function("() => !document.getElementById('privacy-error').hidden")
    assert "rounds must be >= 1" in _text(page, "privacy-error") and _text(page, "dp-epsilon") == "–"
    page.wait_for_function("() => !document.getElementById('bandwidth-unknown').hidden")
    assert "rounds must be >= 1" in _text(page, "bandwidth-unknown") and _text(page, "bw-total") == "–"
    assert _text(page, "bw-down-client") != "–"  # the per-client figures need no rounds
    for box in ("bandwidth", "partition", "resources"):
        assert page.is_hidden(f"#{box}-error"), box
    assert "rounds" not in page.inner_text("#partition-preview")
    assert _text(page, "res-params") != "–"  # Resources still computed (and fresh: see below)

    # A field the resources read: their box says why and drops its old figures.
    page.select_option("#id_model__name", "mlp")
    page.fill("#id_model__options__mlp__hidden", "0")
    page.wait_for_function("() => !document.getElementById('resources-error').hidden")
    assert "hidden" in _text(page, "resources-error") and _text(page, "res-params") == "–"
    assert page.is_hidden("#partition-error")  # the partition does not read the model
    page.wait_for_function("() => !document.getElementById('partition-info').textContent.startsWith('computing')")
    assert page.is_hidden("#bandwidth-unknown")  # its own error now: no leftover note of the rounds
    screenshot(page.locator("aside.side"), artifacts, "side-panel.png")
    page.fill("#id_model__options__mlp__hidden", "32")
    page.fill("#id_rounds", "5")
    page.wait_for_function("() => document.getElementById('resources-error').hidden"
                           " && document.getElementById('privacy-error').hidden"
                           " && document.getElementById('bandwidth-unknown').hidden")  # fmt: skip
    assert _text(page, "res-params") != "–" and _text(page, "bw-total") != "–"
    assert page.errors == [] or all("400" in e for e in page.errors)  # a box's 400 is its answer, not a fault
