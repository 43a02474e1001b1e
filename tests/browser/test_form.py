"""The new-experiment form in real Chromium: fields show only when they apply, the advanced fold,
the keyboard, and the page without JavaScript (every field shows)."""

from __future__ import annotations

import pytest

from fedweb_engine.spec.fields import applies
from fedweb_engine.spec.schema import spec_fields
from orchestrator.web.forms.experiment_forms import HIDDEN_SPEC_FIELDS, form_name
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

RULED = {dotted: meta["applies_when"] for dotted, meta in spec_fields().items() if meta["applies_when"]}
CHOICES = [d for d, meta in spec_fields().items() if meta["choices"] and d not in HIDDEN_SPEC_FIELDS]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def shown(page) -> set[str]:
    """Dotted names of the ruled fields the page shows (its script's verdict)."""
    script = "() => [...document.querySelectorAll('[data-applies-when]')].filter(e => !e.hidden).map(e => e.id)"
    return {i[len("field-") :].replace("__", ".") for i in page.evaluate(script)}


def expected(page) -> set[str]:
    """Dotted names of the ruled fields that apply to the page's current choices, by the engine's rules."""
    values = {d: page.input_value(f"#id_{form_name(d)}") for d in CHOICES}
    return {
        d for d, rule in RULED.items() if applies([{f: list(map(str, v)) for f, v in a.items()} for a in rule], values)
    }


def visible(page, *dotted: str) -> list[bool]:
    return [page.is_visible(f"#field-{form_name(d)}") for d in dotted]


def test_it_shows_and_hides_fields_as_the_selection_changes(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/")
    assert page.is_visible("#applies-note") and not page.evaluate("document.getElementById('advanced').open")
    assert visible(page, "data.alpha", "data.options.digits.image_size") == [True, True]  # dirichlet, digits
    assert visible(
        page,
        "data.shards_per_client",
        "model.options.mlp.hidden",
        "algorithm.options.fedadam.beta1",
        "communication.uplink.options.topk.ratio",
    ) == [False, False, False, False]
    # The client algorithm applies to every server strategy; FedProx's μ is its fedprox option (issue 19).
    assert visible(page, "algorithm.client.name", "algorithm.client.options.fedprox.mu") == [True, False]
    assert shown(page) == expected(page)

    mlp, vgg = "model.options.mlp.", "model.options.vgg."
    adam, adagrad = "algorithm.options.fedadam.", "algorithm.options.fedadagrad."
    up, down = "communication.uplink.options.topk.ratio", "communication.downlink.options.topk.ratio"
    data = "data.options."
    steps = [
        ("data.partition", "shards", ["data.shards_per_client"], ["data.alpha"]),
        ("data.partition", "iid", [], ["data.alpha", "data.shards_per_client"]),
        ("model.name", "mlp", [mlp + "hidden"], [vgg + "blocks", vgg + "width"]),
        ("model.name", "vgg", [vgg + "blocks", vgg + "width"], [mlp + "hidden"]),
        ("algorithm.name", "fedadam", [adam + "beta1", adam + "beta2", adam + "tau"], []),
        ("algorithm.name", "fedadagrad", [adagrad + "beta1", adagrad + "tau"], [adam + "beta1", adam + "beta2"]),
        ("algorithm.name", "fedavgm", ["algorithm.options.fedavgm.momentum"], [adagrad + "beta1", adagrad + "tau"]),
        ("communication.downlink.name", "topk", [down], [up, "communication.error_feedback"]),
        ("communication.uplink.name", "topk", [up, down, "communication.error_feedback"], []),
        ("communication.downlink.name", "fp32", [up], [down]),
        ("communication.uplink.name", "int8", [], [up, "communication.error_feedback"]),
        ("data.name", "synthetic", [data + "synthetic.alpha", data + "synthetic.beta"], [data + "digits.image_size"]),
        ("data.name", "tokens", [data + "tokens.seq_len", data + "tokens.mean_samples"], [data + "synthetic.alpha"]),
        ("data.name", "synthetic_images", [data + "synthetic_images.num_classes"], [data + "tokens.seq_len"]),
        ("data.name", "cifar10", [data + "cifar10.path"], [data + "synthetic_images.num_classes"]),
        ("data.name", "digits", [data + "digits.image_size"], [data + "cifar10.path", data + "npz.path"]),
    ]
    for control, value, now_shown, now_hidden in steps:
        page.select_option(f"#id_{form_name(control)}", value)
        assert visible(page, *now_shown) == [True] * len(now_shown), (control, value)
        assert visible(page, *now_hidden) == [False] * len(now_hidden), (control, value)
        assert shown(page) == expected(page), (control, value)
    assert page.errors == []


def test_it_is_usable_with_the_keyboard(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/")
    page.select_option("#id_data__partition", "iid")
    page.focus("#id_data__partition")
    page.keyboard.press("Tab")  # past the hidden alpha and shards: they are out of the focus order
    assert page.evaluate("document.activeElement.id") == "id_model__name"
    assert page.is_hidden("#id_compute__precision")  # folded
    page.focus("#advanced > summary")
    page.keyboard.press("Enter")
    assert page.evaluate("document.getElementById('advanced').open") and page.is_visible("#id_compute__precision")
    page.keyboard.press("Tab")  # into the fold, at its first field
    assert page.evaluate("document.activeElement.id") == "id_data__test_fraction"
    page.focus("#advanced > summary")
    page.keyboard.press("Space")
    assert page.is_hidden("#id_compute__precision")
    labels = page.evaluate(
        "() => [...document.querySelectorAll('.field select, .field input')].filter(e => !e.labels.length).map(e => e.id)"
    )
    assert labels == []
    assert page.errors == []


def test_it_keeps_a_field_with_an_error_in_view_and_opens_the_fold_for_one(page, alice, daphne):
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/experiments/new/")
    page.fill("#id_name", "hidden but judged")
    page.fill("#id_data__alpha", "0")
    page.select_option("#id_data__partition", "iid")  # alpha no longer applies, but it is still checked
    assert visible(page, "data.alpha") == [False]
    page.click("#submit")
    page.wait_for_selector("#field-data__alpha.invalid")
    assert visible(page, "data.alpha") == [True] and "data.alpha must be > 0" in page.text_content("#field-data__alpha")
    assert not page.evaluate("document.getElementById('advanced').open")

    page.fill("#id_data__alpha", "0.5")
    page.click("#advanced > summary")
    page.fill("#id_local__weight_decay", "5")
    page.click("#submit")
    page.wait_for_selector("#field-local__weight_decay.invalid")
    assert page.evaluate("document.getElementById('advanced').open") and visible(page, "local.weight_decay") == [True]


def test_it_shows_every_field_without_javascript(browser, alice, daphne):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1360, "height": 1000})
    try:
        page = context.new_page()
        base = f"http://{daphne}"
        log_in(page, base, "alice", "alice-password")
        page.goto(f"{base}/experiments/new/")
        hidden = [d for d in spec_fields() if d not in HIDDEN_SPEC_FIELDS and not visible(page, d)[0]]
        assert hidden == []
        assert page.is_hidden("#applies-note")
    finally:
        context.close()
