"""Issue 9's acceptance in real Chromium: the web server and a Celery worker loaded the example
plugin (``FEDWEB_PLUGINS`` + ``PYTHONPATH``, as an operator sets them); the New experiment form
offers its model, dataset and strategy with their options, judges them as the engine does, and a
run of them completes on the worker with the live charts drawing its rounds."""

from __future__ import annotations

import os

import pytest

from orchestrator.experiments.models import Experiment
from tests import live
from tests.browser.conftest import log_in, start_daphne, trace_xs

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

EXAMPLE = live.EXAMPLE_PLUGIN
PLUGIN_ENV = {
    "FEDWEB_PLUGINS": EXAMPLE,
    "PYTHONPATH": os.pathsep.join(p for p in (str(live.EXAMPLE_DIR), os.environ.get("PYTHONPATH", "")) if p),
}
RESNET = ("model.options.resnet_small.width", "model.options.resnet_small.blocks")
OTHERS = ("model.options.mlp.hidden", "model.options.vgg.width")
ROUNDS = 3


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _id(dotted: str) -> str:
    return "#field-" + dotted.replace(".", "__")


def _visible(page, *dotted: str) -> list[bool]:
    return [page.is_visible(_id(d)) for d in dotted]


def _options(page, select: str) -> list[str]:
    return page.evaluate(f"() => [...document.querySelectorAll('{select} option')].map(o => o.value)")


def test_the_form_offers_the_plugins_components_judges_their_options_and_runs_them(page, alice, live_env, workers,
                                                                                    tmp_path):  # fmt: skip
    workers.start("plug", env=PLUGIN_ENV)
    port = live.free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_daphne({**live_env, **PLUGIN_ENV}, tmp_path, port)
    try:
        log_in(page, base, "alice", "alice-password")
        page.goto(f"{base}/experiments/new/")
        assert "resnet_small" in _options(page, "#id_model__name")
        assert "stripes" in _options(page, "#id_data__name")
        assert "fedavg_clipped" in _options(page, "#id_algorithm__name")

        # Picking the plugin's model shows its options and hides the others', and back: no reload.
        page.evaluate("() => { window.notReloaded = true; }")
        assert _visible(page, *RESNET) == [False, False]
        page.select_option("#id_model__name", "resnet_small")
        assert _visible(page, *RESNET, *OTHERS) == [True, True, False, False]
        page.select_option("#id_model__name", "mlp")
        assert _visible(page, *RESNET, *OTHERS) == [False, False, True, False]
        page.select_option("#id_model__name", "resnet_small")
        assert _visible(page, *RESNET, *OTHERS) == [True, True, False, False]
        assert page.evaluate("() => window.notReloaded") is True

        # A small run of all three plugin components; the width is first out of the plugin's range.
        page.fill("#id_name", "plugin run")
        page.fill("#id_rounds", str(ROUNDS))
        page.select_option("#id_data__name", "stripes")
        page.fill("#id_data__options__stripes__num_samples", "240")
        page.fill("#id_data__options__stripes__side", "8")
        page.fill("#id_data__num_clients", "4")
        page.select_option("#id_data__partition", "iid")
        page.fill("#id_participation__clients_per_round", "2")
        page.select_option("#id_algorithm__name", "fedavg_clipped")
        page.fill("#id_compute__device", "cpu")
        page.fill("#id_model__options__resnet_small__width", "0")
        page.click("#submit")
        page.wait_for_selector("#field-model__options__resnet_small__width.invalid")
        error = page.text_content("#field-model__options__resnet_small__width .errorlist")
        assert "model.options.width must be >= 4" in error
        assert not Experiment.objects.exists()
        assert page.input_value("#id_model__name") == "resnet_small"  # the page came back as it was sent

        page.fill("#id_model__options__resnet_small__width", "4")
        page.fill("#id_model__options__resnet_small__blocks", "1")
        page.click("#submit")
        page.wait_for_url("**/experiments/*/")
        experiment = Experiment.objects.get()
        assert experiment.spec["model"] == {"name": "resnet_small", "options": {"width": 4, "blocks": 1}}
        assert (experiment.spec["data"]["name"], experiment.spec["algorithm"]["name"]) == ("stripes", "fedavg_clipped")
        assert {(p["kind"], p["name"]) for p in experiment.plugins} == {
            ("model", "resnet_small"), ("dataset", "stripes"), ("strategy", "fedavg_clipped"),
        }  # fmt: skip

        done = f"() => document.getElementById('chart-accuracy').data[0].x.length === {ROUNDS}"
        page.wait_for_function(done, timeout=120_000)
        page.wait_for_function("() => document.getElementById('status-badge').textContent === 'completed'")
        assert trace_xs(page, "chart-accuracy") == [list(range(1, ROUNDS + 1))]
        assert page.text_content("#st-worker").startswith("plug@")
        # The previews answered 400 while the width was out of range; nothing else may have failed.
        assert [e for e in page.errors if "status of 400" not in e] == []
    finally:
        server.stop()
