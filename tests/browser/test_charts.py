"""The charts researchers read and the runs as tables, in real Chromium against real daphne and Redis."""

from __future__ import annotations

import pytest

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.live import events
from tests.browser.conftest import drawn, log_in
from tests.browser.test_live_pages import _off_the_loop
from tests.factories import round_result
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _ids_in_order(page, table: str) -> list[int]:
    return [
        int(i)
        for i in page.evaluate(f"() => [...document.querySelectorAll('#{table} tbody tr')].map(t => t.dataset.id)")
    ]


def test_it_sorts_the_list_and_compare_tables_by_final_accuracy(page, alice, daphne):
    low, high, mid = (make_experiment(alice, rounds=n, name=f"{n} rounds") for n in (2, 7, 4))  # accuracy 0.1 × rounds
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    with page.expect_navigation():  # the runs table sorts on the server
        page.click('#experiments th[data-col="final_accuracy"] a.sort')
    assert _ids_in_order(page, "experiments") == [high.pk, mid.pk, low.pk]  # best first
    with page.expect_navigation():
        page.click('#experiments th[data-col="final_accuracy"] a.sort')
    assert _ids_in_order(page, "experiments") == [low.pk, mid.pk, high.pk]
    # The reader hides a column; the choice is kept for them (no parameter in the URL next time).
    page.click("#column-picker > summary")
    page.uncheck('#column-picker input[value="mb"]')
    with page.expect_navigation():
        page.click("#apply-columns")
    page.goto(f"http://{daphne}/")
    assert page.locator('#experiments th[data-col="mb"]').count() == 0
    assert page.locator('#experiments th[data-col="final_accuracy"]').is_visible()

    page.goto(f"http://{daphne}/compare/?ids={low.pk},{high.pk},{mid.pk}")
    page.click('#runs th[data-col="final_accuracy"]')
    assert _ids_in_order(page, "runs") == [high.pk, mid.pk, low.pk]
    assert page.errors == []


def test_it_keeps_the_user_s_zoom_while_live_rounds_arrive(page, alice, daphne):
    experiment = make_experiment(alice, rounds=6, spec={"rounds": 20})
    Experiment.objects.filter(pk=experiment.pk).update(status="running")
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('conn').textContent === 'live'")
    page.evaluate("() => Plotly.relayout('chart-accuracy', {'xaxis.range': [2, 4]})")
    # Zoom is linked: the other charts follow the x range.
    page.wait_for_function("() => document.getElementById('chart-loss').layout.xaxis.range[1] === 4")

    for n in range(7, 10):
        metrics = round_result(n)
        RoundMetric.record(experiment, metrics)
        _off_the_loop(events.publish_round, experiment.pk, metrics)
    page.wait_for_function("() => document.getElementById('chart-accuracy').data[0].x.length === 9")
    for chart in ("chart-accuracy", "chart-loss"):
        assert page.evaluate(f"() => document.getElementById('{chart}').layout.xaxis.range") == [2, 4], chart
    assert page.errors == []


def test_it_plots_a_finished_run_against_megabytes_smoothed_and_on_a_log_scale(page, alice, daphne):
    experiment = make_experiment(alice, rounds=6, status="completed")
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('chart-loss').data.length > 0")

    page.select_option("#x-axis", "mb")  # each round of round_result sends 8000 bytes up + down
    loss = next(t for t in drawn(page, "chart-loss") if t[0] == "test loss")
    assert loss[2] == pytest.approx([0.008 * n for n in range(1, 7)])
    assert page.evaluate("() => document.getElementById('chart-loss').layout.xaxis.title.text").startswith("MB")

    page.fill("#smoothing", "0.6")
    page.dispatch_event("#smoothing", "input")
    traces = drawn(page, "chart-loss")
    raw = next(t for t in traces if t[0] == "test loss (raw)")
    smoothed = next(t for t in traces if t[0] == "test loss")
    assert raw[3] == pytest.approx([2.1 / n for n in range(1, 7)])  # the raw points stay, faint, behind
    assert smoothed[3][0] == pytest.approx(2.1) and smoothed[3][-1] > raw[3][-1]  # the EMA lags the fall
    names = [t[0] for t in traces]
    assert names.index("test loss (raw)") < names.index("test loss")

    page.check("#log-y")
    assert page.evaluate("() => document.getElementById('chart-loss').layout.yaxis.type") == "log"
    assert page.evaluate("() => document.getElementById('chart-accuracy').layout.yaxis.type") == "log"
    with page.expect_download() as download:
        page.click('button.chart-dl[data-chart="chart-loss"][data-format="csv"]')
    csv = open(download.value.path(), encoding="utf-8").read().splitlines()
    assert csv[0].startswith("trace,round,MB communicated") and len(csv) == 1 + 2 * 6
    assert page.errors == []


# Live rounds that reach every declared rule: a round without evaluation (the finals keep the last
# evaluated one), a DP round then one the accountant missed, throughput with and without time.
LIVE_ROUNDS = (
    round_result(4, test_accuracy=0.95, dp_epsilon=0.5, client_accuracy_mean=0.6, train_loss_p50=0.3),
    round_result(5, test_accuracy=None, test_loss=None, round_seconds=0.0, bytes_up=123_456),
    round_result(6, test_accuracy=0.2, test_loss=0.7, dp_epsilon=None, vram_peak_mb=900.0),
)


def _page_state(page) -> dict:
    """What the dashboard shows of its rounds: the summary block, and every chart's points on each x axis."""
    summary = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('#summary [data-col]')]"
        ".map(el => [el.dataset.col, el.querySelector('b').textContent]))"
    )
    charts = page.evaluate("() => [...document.querySelectorAll('.chart[id^=chart-]')].map(d => d.id)")
    state = {"summary": summary}
    for axis in ("round", "seconds", "mb"):
        page.select_option("#x-axis", axis)
        state[axis] = {c: [t for t in drawn(page, c) if t[1] is not False] for c in charts}
    return state


def test_it_folds_live_rounds_into_the_summary_and_the_charts_as_the_server_computes_them(page, alice, daphne):
    # The page evaluates the formulas and summary rules the server sends as data; a reload draws
    # the same rounds from the server's own evaluation: the two must show the same numbers.
    spec = {"rounds": 20, "data": {"client_test_fraction": 0.2}, "evaluation": {"clients": "cohort"},
            "privacy": {"mechanism": "gaussian"}}  # fmt: skip
    experiment = make_experiment(alice, rounds=3, spec=spec)
    Experiment.objects.filter(pk=experiment.pk).update(status="running")
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('conn').textContent === 'live'")

    for metrics in LIVE_ROUNDS:
        RoundMetric.record(experiment, metrics)
        _off_the_loop(events.publish_round, experiment.pk, metrics)
    page.wait_for_function("() => document.getElementById('chart-loss').data[0].x.length === 6")
    page.wait_for_function("() => document.querySelector('#summary [data-col=rounds] b').textContent === '6'")
    live = _page_state(page)

    page.reload()
    page.wait_for_function("() => document.getElementById('chart-loss').data.length > 0")
    rendered = _page_state(page)
    assert live["summary"] == rendered["summary"]
    assert rendered["summary"]["epsilon"] == "0.500" and rendered["summary"]["final_accuracy"] == "0.2000"
    for axis in ("round", "seconds", "mb"):
        assert live[axis].keys() == rendered[axis].keys(), axis
        for chart, traces in rendered[axis].items():
            assert [t[0] for t in live[axis][chart]] == [t[0] for t in traces], (axis, chart)
            for mine, theirs in zip(live[axis][chart], traces, strict=True):
                assert mine[2] == pytest.approx(theirs[2]) and mine[3] == pytest.approx(theirs[3]), (
                    axis,
                    chart,
                    mine[0],
                )
    assert page.errors == []
