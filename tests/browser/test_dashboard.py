"""Acceptance of the dashboard in real Chromium, against real daphne, a real Celery worker and Redis."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from orchestrator.experiments.models import Experiment
from orchestrator.sweeps.stats import run_labels
from tests import live
from tests.browser.conftest import ARTIFACTS, drawn, log_in, points, start_daphne, trace_xs
from tests.factories import new_experiment, round_result
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]

DOCS_SCREENSHOT = ARTIFACTS.parent / "docs" / "dashboard.png"
CHARTS = ("chart-loss", "chart-accuracy", "chart-memory", "chart-bandwidth", "chart-time")


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def test_it_runs_the_quickstart_preset_live_and_reports_offline(page, alice, daphne, workers, artifacts):
    workers.start("w1")
    base = f"http://{daphne}"
    requested = []
    page.on("request", lambda r: requested.append(r.url))
    log_in(page, base, "alice", "alice-password")
    page.click("text=New experiment")
    page.click('a[data-preset="quickstart"]')
    page.wait_for_url("**/experiments/new/?preset=quickstart")
    page.fill("#id_rounds", "8")
    page.fill("#id_description", "The quickstart shrunk for the browser test: 8×8 digits, the mlp, 5 local epochs.")
    # Shrunk through the form: the quickstart's CNN on 28x28 digits takes ~2 s a round on 2 shared
    # cores; the native 8x8 digits with the mlp (same 100 clients, 10 per round), 5 local epochs
    # at lr 0.1 take ~0.5 s a round and reach ~85% accuracy in 8 rounds.
    page.select_option("#id_data__options__digits__image_size", "8")
    page.select_option("#id_model__name", "mlp")
    page.fill("#id_local__epochs", "5")
    page.fill("#id_local__lr", "0.1")
    page.wait_for_function("() => document.getElementById('bw-total').textContent.includes('MB')")
    page.wait_for_function("() => (document.getElementById('partition-chart').data || [{}])[0].type === 'heatmap'")
    page.click("#submit")
    page.wait_for_url("**/experiments/*/")
    experiment = Experiment.objects.get()
    assert experiment.spec["rounds"] == 8 and experiment.spec["data"]["options"]["image_size"] == 8
    assert experiment.spec["model"]["name"] == "mlp" and experiment.spec["local"]["epochs"] == 5

    page.wait_for_function("() => document.getElementById('chart-accuracy').data[0].x.length === 8", timeout=120_000)
    page.wait_for_function("() => document.getElementById('status-badge').textContent === 'completed'")
    assert trace_xs(page, "chart-accuracy") == [list(range(1, 9))]
    assert page.text_content("#st-round") == "8"
    assert page.locator("#rounds-table tbody tr").count() == 8
    page.wait_for_function("() => document.getElementById('log').textContent.includes('Completed 8 rounds')")
    page.wait_for_function("() => document.getElementById('st-worker').textContent.startsWith('w1@')")
    assert not [url for url in requested if "statuses.json" in url]  # status events carry the worker
    live_figures = {chart: drawn(page, chart) for chart in CHARTS}
    assert page.locator("#btn-pause").is_hidden() and page.locator("#btn-delete").is_visible()
    page.set_viewport_size({"width": 1360, "height": 1320})
    page.wait_for_timeout(500)  # let plotly finish the resize before the picture
    page.screenshot(path=str(artifacts / "dashboard.png"))
    if os.environ.get("FEDWEB_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(artifacts / "dashboard.png", DOCS_SCREENSHOT)

    # The static report, downloaded from the page, opened from file:// with the network cut.
    with page.expect_download() as download:
        page.click("#download-report")
    report = artifacts / "report.html"
    download.value.save_as(report)
    offline = page.context.browser.new_context(offline=True)
    try:
        view = offline.new_page()
        view.goto(report.as_uri())
        view.wait_for_function("() => document.querySelectorAll('#chart-accuracy .main-svg').length > 0")
        assert view.evaluate("() => typeof window.Plotly") == "object"
        for chart in CHARTS:
            assert view.locator(f"#{chart} .main-svg").count() > 0, chart
        assert trace_xs(view, "chart-accuracy") == [list(range(1, 9))]
        # The points the live page appended round by round are those the server computed for the
        # report from the database: one chart definition (orchestrator/web/charts.py).
        for chart in CHARTS:
            for live_trace, report_trace in zip(live_figures[chart], drawn(view, chart), strict=True):
                assert live_trace[:2] == report_trace[:2], chart
                assert live_trace[2] == pytest.approx(report_trace[2], rel=1e-12), (chart, live_trace[0])
    finally:
        offline.close()
    assert page.errors == []


def _pause(experiment: Experiment) -> int:
    """Pause the run and wait until the round in flight, if any, is recorded: a point in the run
    that stays put however fast rounds are. Returns the rounds recorded."""
    experiment.refresh_from_db()
    assert experiment.pause(), f"the run must still be going to pause it, not {experiment.status}"

    def settled() -> bool:
        experiment.refresh_from_db()
        return experiment.claimed_round <= experiment.current_round

    live.wait_for(settled, 60, "the round in flight to be recorded")
    return experiment.current_round


def _recorded(experiment: Experiment, rounds: int) -> None:
    live.wait_for(lambda: Experiment.objects.get(pk=experiment.pk).current_round >= rounds, 60, f"round {rounds}")


def test_it_reloads_mid_run_and_reconnects_without_duplicate_points(page, alice, live_env, workers, tmp_path):
    workers.start("w1")
    port = live.free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_daphne(live_env, tmp_path, port)
    total = 24
    length = "() => document.getElementById('chart-loss').data[0].x.length"
    try:
        # Pauses (from here, between rounds) hold the run still at each step, whatever a round takes: so the
        # mlp on 8x8 digits, one local epoch (rounds of a few tenths of a second), not the CNN on 28x28
        # (~2 s a round: the test waited ~50 s on its 24 rounds and proved nothing more).
        spec = {"rounds": total, "data": {"name": "digits", "num_clients": 100, "alpha": 0.5, "options": {"image_size": 8}},
                "model": {"name": "mlp"}, "participation": {"clients_per_round": 10}, "local": {"batch_size": 10},
                "compute": {"device": "cpu"}}  # fmt: skip
        experiment = new_experiment(owner=alice, name="reload me", spec=spec)
        experiment.start()
        log_in(page, base, "alice", "alice-password")
        page.goto(f"{base}/experiments/{experiment.pk}/")
        page.wait_for_function(f"{length} >= 2", timeout=90_000)
        paused_at = _pause(experiment)
        assert 2 <= paused_at < total

        page.reload()
        assert json.loads(page.text_content("#charts-data"))["last_round"] == paused_at
        assert points(page, "chart-loss") == paused_at  # every round so far, from the database
        experiment.resume()
        page.wait_for_function(f"{length} > {paused_at}")  # and the live ones after them

        # The web server goes away mid-run and rounds are recorded meanwhile: the page retries with
        # backoff, then resumes with ?after=N and gets the rounds it missed, once each.
        seen = _pause(experiment)
        page.wait_for_function(f"{length} === {seen}")
        server.stop()
        page.wait_for_function("() => document.getElementById('conn').textContent === 'reconnecting…'")
        experiment.resume()
        _recorded(experiment, seen + 2)
        missed_until = _pause(experiment)
        assert missed_until < total
        server = start_daphne(live_env, tmp_path, port)
        page.wait_for_function("() => document.getElementById('conn').textContent === 'live'", timeout=45_000)
        page.wait_for_function(f"{length} === {missed_until}")
        experiment.resume()
        page.wait_for_function(f"{length} === {total}", timeout=120_000)
        page.wait_for_function("() => document.getElementById('status-badge').textContent === 'completed'")
        for chart in CHARTS:
            for name, visible, xs, _ in drawn(page, chart):
                if name.startswith("VRAM") or "beside the" in name:  # a CPU run; FedAvg sends nothing beside
                    assert (visible, xs) == (False, []), (chart, name)
                else:
                    assert (visible, xs) == (True, list(range(1, total + 1))), (chart, name)  # in order, once each
        assert page.locator("#rounds-table tbody tr").count() == total
        # The only console errors allowed are the failed connection attempts while the server was down.
        assert [e for e in page.errors if "WebSocket" not in e and "ERR_CONNECTION_REFUSED" not in e] == []
    finally:
        server.stop()


def test_it_overlays_two_experiments_on_the_compare_page(page, alice, daphne):
    a = make_experiment(alice, rounds=6, name="fedavg run", spec={"rounds": 6, "algorithm": {"name": "fedavg"}})
    b = make_experiment(
        alice, rounds=4, name="fedprox run", spec={"rounds": 6, "algorithm": {"name": "fedprox", "mu": 0.1}}
    )
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    # Pick both on the list and press "Compare selected", as a user would.
    page.check(f'input.pick[value="{a.pk}"]')
    page.check(f'input.pick[value="{b.pk}"]')
    page.click("#compare")
    page.wait_for_url("**/compare/?ids=*")
    page.wait_for_function("() => (document.getElementById('cmp-accuracy').data || []).length === 2")
    names = page.evaluate("() => document.getElementById('cmp-accuracy').data.map(t => t.name)")
    a.refresh_from_db()
    b.refresh_from_db()
    # Each run by its short label (the fields that differ), the same in the page's one legend.
    assert sorted(names) == sorted(run_labels([a, b])) and "client=fedavg" in " ".join(names)
    # Each legend item: its swatch, its label, then its "to target" figures.
    legend = page.locator("#chart-legend .legend-item").evaluate_all(
        "els => els.map(e => e.childNodes[1].textContent.trim())"
    )
    assert sorted(legend) == sorted(run_labels([a, b]))
    assert sorted(len(x) for x in trace_xs(page, "cmp-accuracy")) == [4, 6]
    for chart in ("cmp-loss", "cmp-memory", "cmp-bandwidth"):
        assert page.locator(f"#{chart} .main-svg").count() > 0
    assert "algorithm.client.name" in page.text_content("#differences")  # FedProx is the client algorithm
    assert round_result(1)["test_accuracy"] in page.evaluate("() => document.getElementById('cmp-accuracy').data[0].y")
    assert page.errors == []
