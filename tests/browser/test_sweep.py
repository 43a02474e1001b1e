"""Acceptance of sweeps (issue 12 item 1): a 4 x 3 sweep (mu x seeds) of the FedProx stragglers
preset, submitted from the form in real Chromium, runs on a real Celery worker; its page shows 4
mean ± std lines and the configurations table, which sorts by the clicked column. The page follows
the runs over its own socket (issue 21), without reloading itself."""

from __future__ import annotations

import copy
import json
import re

import pytest

from fedweb_engine.spec.presets import PRESETS
from orchestrator.sweeps.models import Sweep
from tests import live
from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.slow]

MUS = (0, 0.01, 0.1, 1)


def small_stragglers() -> dict:
    """The preset, small enough for CI: 3 rounds, 6 clients, 3 a round, 2 local epochs, on the CPU."""
    spec = copy.deepcopy(PRESETS["fedprox-stragglers"]["spec"])
    spec.update(rounds=3, compute={"device": "cpu"})
    spec["data"]["num_clients"] = 6
    spec["participation"]["clients_per_round"] = 3
    spec["local"]["epochs"] = 2
    return spec


def _column(page, key: str) -> list[float]:
    script = "(k) => Array.from(document.querySelectorAll(`#sweep-table tbody td[data-key='${k}']`))"
    return page.evaluate(script + ".map(td => parseFloat(td.dataset.value))", key)


def test_it_runs_a_4_by_3_sweep_from_the_form_and_charts_mean_and_std(page, django_user_model, daphne, workers,
                                                                      artifacts):  # fmt: skip
    django_user_model.objects.create_user("alice", password="alice-password")
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/sweeps/new/?preset=fedprox-stragglers")
    # The base spec in the New experiment form's fields (the preset filled them), not raw JSON.
    assert page.input_value("#id_algorithm__client__name") == "fedprox" and page.input_value("#id_base_spec") == ""
    assert page.is_visible("#field-algorithm__client__options__fedprox__mu")  # FedProx is a client algorithm now
    assert page.is_hidden("#field-model__options__mlp__hidden")
    page.fill("#id_name", "fedprox mu")
    small = small_stragglers()
    page.fill("#id_rounds", str(small["rounds"]))
    page.fill("#id_compute__device", "cpu")
    page.fill("#id_data__num_clients", str(small["data"]["num_clients"]))
    page.fill("#id_participation__clients_per_round", str(small["participation"]["clients_per_round"]))
    page.fill("#id_local__epochs", str(small["local"]["epochs"]))
    page.fill("#id_axes", "algorithm.mu: " + ", ".join(map(str, MUS)))
    page.fill("#id_seeds", "0, 1, 2")
    page.click("#submit-sweep")
    page.wait_for_url(f"{base}/sweeps/*/")

    sweep = Sweep.objects.get()
    runs = sweep.experiments.all()
    assert runs.count() == 12
    first = runs.order_by("pk").first().spec
    assert (first["rounds"], first["compute"]["device"], first["data"]["num_clients"]) == (3, "cpu", 6)
    from playwright.sync_api import expect  # here: without playwright the browser fixture skips

    # Before any result: the sweep's socket is live, and the parallel coordinates wait for a value.
    page.wait_for_function("() => document.getElementById('sweep-conn').dataset.state === 'live'")
    page.evaluate("() => { window.notReloaded = true; }")
    expect(page.locator("#sweep-parallel-pending")).to_be_visible()  # no worker yet: no run has a result
    assert page.locator("#sweep-parallel").is_hidden()
    screenshot(page, artifacts, "sweep-before.png", full_page=True)
    workers.start("w1", concurrency=2)

    live.wait_for(lambda: all(e.status == "completed" for e in runs.all()), 240, "12 runs completed")
    # The rows, progress and charts follow the runs over the sweep's socket: no reload of the page.
    expect(page.locator("#sweep-progress")).to_contain_text(re.compile(r"12\s+of\s+12\s+runs finished"),
                                                            timeout=60_000)  # fmt: skip
    page.wait_for_function("() => document.getElementById('sweep-parallel').data !== undefined")
    assert page.evaluate("() => window.notReloaded") is True
    assert page.locator("#sweep-parallel-pending").is_hidden()
    ids = ",".join(str(pk) for pk in runs.order_by("pk").values_list("pk", flat=True))
    assert page.get_attribute("#compare-sweep", "href") == f"/compare/?ids={ids}&group=1"

    means = page.evaluate("() => document.getElementById('sweep-test_accuracy').data"
                          ".filter(t => t.meta.role === 'mean').map(t => [t.name, t.y.length])")  # fmt: skip
    assert sorted(name for name, _ in means) == sorted(f"mu={json.dumps(float(mu))}" for mu in MUS)
    assert all(length == 3 for _, length in means)  # one mean point a round
    bands = page.evaluate("() => document.getElementById('sweep-test_accuracy').data"
                          ".filter(t => t.meta.role === 'lower' && t.fill === 'tonexty').length")  # fmt: skip
    assert bands == 4
    parallel = page.evaluate("() => document.getElementById('sweep-parallel').data[0].dimensions.length")
    assert parallel == 2  # mu -> final accuracy

    final = _column(page, "final_accuracy")
    assert len(final) == 4 and final == sorted(final, reverse=True)  # best configuration first
    page.click("#sweep-table th[data-key='final_loss']")
    losses = _column(page, "final_loss")
    assert losses == sorted(losses, reverse=True)
    page.click("#sweep-table th[data-key='final_loss']")
    assert _column(page, "final_loss") == sorted(losses)
    page.click("#sweep-table th[data-key='final_accuracy']")
    assert _column(page, "final_accuracy") == final
    screenshot(page, artifacts, "sweep.png", full_page=True)
    assert page.errors == []
