"""A search's sweep page in real Chromium, against real daphne and Redis: the rungs chart with the
stopped configurations faded, the compute used against the full grid's, and each configuration's
state; a decision made meanwhile (another configuration reaches its rung) reaches the page over the
sweep's socket, which refetches without reloading."""

from __future__ import annotations

import threading

import pytest

from orchestrator.sweeps.create import create_sweep
from tests.browser.conftest import log_in
from tests.conftest import TINY_SPEC
from tests.sweeps.test_search import _both

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def _off_the_loop(fn, *args) -> None:
    """Run ``fn`` in another thread: Playwright's sync API keeps an event loop in this one, where the
    search's publishing (async_to_sync) refuses to run; a worker decides from a plain thread."""
    thread = threading.Thread(target=fn, args=args)
    thread.start()
    thread.join()


def test_the_page_draws_the_rungs_and_follows_the_search_s_decisions(page, django_user_model, daphne):
    alice = django_user_model.objects.create_user("alice", password="alice-password")
    sweep = create_sweep(owner=alice, name="asha", base=TINY_SPEC, axes={"local.lr": [0.1, 0.05, 0.01], "seed": [0, 1]},
                         stopping="asha", search={"first_rung": 1, "eta": 2, "last_k": 1})  # fmt: skip
    _off_the_loop(_both, sweep, 0.1, 1, 0.5, 0.7)
    _off_the_loop(_both, sweep, 0.05, 1, 0.2, 0.2)  # two of three at rung 1: they wait for the third
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/sweeps/{sweep.pk}/")
    page.wait_for_function("() => document.getElementById('sweep-conn').dataset.state === 'live'")
    page.evaluate("() => { window.notReloaded = true; }")
    assert "4 rounds trained of 30 for the full grid (13.3%)" in page.inner_text("#search-compute")
    waiting = page.inner_text("#search-trials tr[data-trial='1'] .trial-state")
    assert waiting == "waits at rung 1 for the configurations still below it"
    assert page.evaluate("() => document.getElementById('sweep-rungs').data.map(t => t.opacity)") == [1, 1, 1]

    _off_the_loop(_both, sweep, 0.01, 1, 0.1, 0.2)  # the third arrives: the rung is judged, top 3/2 = 1 goes on
    stopped = "() => document.querySelector(\"#search-trials tr[data-trial='2']\").dataset.state === 'stopped'"
    page.wait_for_function(stopped)
    assert page.inner_text("#search-trials tr[data-trial='1'] .trial-state") == "stopped at rung 1 (rank 2 of 3)"
    assert page.inner_text("#search-trials tr[data-trial='2'] .trial-state") == "stopped at rung 1 (rank 3 of 3)"
    page.wait_for_function("() => document.getElementById('sweep-rungs').data[2].opacity === 0.3")
    rungs = page.evaluate("() => document.getElementById('sweep-rungs').data.map(t => [t.name, t.opacity])")
    assert rungs == [["lr=0.1", 1], ["lr=0.05", 0.3], ["lr=0.01", 0.3]]  # the stopped ones faded
    assert "6 rounds trained of 30 for the full grid (20.0%)" in page.inner_text("#search-compute")
    assert page.evaluate("() => window.notReloaded") is True
    assert page.errors == []
