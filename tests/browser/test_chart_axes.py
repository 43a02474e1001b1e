"""Issue 21's charts, in real Chromium against real daphne: the compare page's one legend with short
labels, grouped bands, a chart whose x is not rounds kept out of the x-axis choice and the zoom
link, and log y on smoothed constant series with readable ticks."""

from __future__ import annotations

import pytest

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from tests.browser.conftest import log_in, screenshot
from tests.factories import round_result
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.integration]

CMP = ("cmp-loss", "cmp-accuracy", "cmp-memory", "cmp-bandwidth", "cmp-time", "cmp-participants")


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _finished(owner, rounds: list[dict], **kwargs) -> Experiment:
    experiment = make_experiment(owner, status="completed", **kwargs)
    for r in rounds:
        RoundMetric.record(experiment, r)
    Experiment.objects.filter(pk=experiment.pk).update(current_round=len(rounds))
    return experiment


def _ticks(page, chart: str, axis: str) -> list[tuple[float, str]]:
    """(value, label) of the ticks plotly drew on ``axis`` of ``chart``, log axes in real units."""
    script = """([id, ax]) => { const a = document.getElementById(id)._fullLayout[ax];
      return (a._vals || []).map(v => [a.type === 'log' ? Math.pow(10, v.x) : v.x, v.text]); }"""
    return [tuple(t) for t in page.evaluate(script, [chart, axis])]


def _reads_as_its_value(value: float, text: str) -> bool:
    number = float(text.replace("\u2212", "-").replace(",", ""))
    return abs(number - value) <= 0.01 * abs(value)


def _overlapping_labels(page, chart: str, cls: str) -> int:
    script = """([id, cls]) => { const boxes = [...document.querySelectorAll(`#${id} .${cls} text`)]
        .map(t => t.getBoundingClientRect()).filter(b => b.height > 0).sort((a, b) => a.top - b.top);
      let n = 0; for (let i = 1; i < boxes.length; i++) if (boxes[i].top < boxes[i - 1].bottom - 1) n++; return n; }"""
    return page.evaluate(script, [chart, cls])


def test_it_shares_one_legend_with_short_labels_across_the_compare_charts_of_six_runs(page, alice, daphne, artifacts):
    runs = []
    for mu in (0.01, 0.1, 1.0):
        for seed in (0, 1):
            spec = {"algorithm": {"name": "fedprox", "mu": mu}, "seed": seed, "rounds": 8}
            rounds = [round_result(n, test_accuracy=min(0.95, 0.1 * n + mu / 5 + seed / 50)) for n in range(1, 9)]
            runs.append(_finished(alice, rounds, name=f"fedprox stragglers mu {mu} seed {seed} (long name)", spec=spec))
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    ids = ",".join(str(e.pk) for e in runs)
    page.goto(f"http://{daphne}/compare/?ids={ids}")
    page.wait_for_function("() => document.getElementById('cmp-participants').data !== undefined")

    # Each legend item: its swatch, its label, then its "to target" figures.
    labels = page.locator("#chart-legend .legend-item").evaluate_all("els => els.map(e => e.childNodes[1].textContent)")
    assert [t.strip() for t in labels] == [f"mu={mu} seed={s}" for mu in (0.01, 0.1, 1.0) for s in (0, 1)]
    for chart in CMP:
        assert page.evaluate(f"() => document.querySelectorAll('#{chart} g.legend').length") == 0, chart
        # The plots keep their height (a six-run legend had left them ~60 px).
        assert page.evaluate(f"() => document.getElementById('{chart}')._fullLayout._size.h") >= 200, chart

    hidden = str(runs[1].pk)
    page.click(f'#chart-legend .legend-item[data-key="{hidden}"]')
    page.wait_for_function(
        "(key) => document.getElementById('cmp-accuracy').data.some(t => t.meta.legend === key && t.visible === false)",
        arg=hidden,
    )
    for chart in CMP:
        shown = page.evaluate(f"() => document.getElementById('{chart}').data.map(t => [t.meta.legend, t.visible])")
        assert all(v is False for key, v in shown if key == hidden), chart
        # Every other run is still drawn (its traces with points: a CPU run has no VRAM line).
        assert {key for key, v in shown if v is not False} == {str(e.pk) for e in runs} - {hidden}, chart
    assert page.locator(f'#chart-legend .legend-item[data-key="{hidden}"]').get_attribute("aria-pressed") == "false"
    screenshot(page, artifacts, "compare.png", full_page=True)

    page.goto(f"http://{daphne}/compare/?ids={ids}&group=1")
    page.wait_for_function("() => document.getElementById('grp-accuracy').data !== undefined")
    means = page.evaluate("() => document.getElementById('grp-accuracy').data.filter(t => t.meta.role === 'mean')"
                          ".map(t => t.name)")  # fmt: skip
    assert means == ["mu=0.01", "mu=0.1", "mu=1.0"]
    bands = "() => document.getElementById('grp-accuracy').data.filter(t => t.fill === 'tonexty').length"
    assert page.evaluate(bands) == 3
    page.locator("#grp-accuracy").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "compare-grouped.png"), full_page=True)
    assert page.errors == []


def test_it_keeps_the_participation_histogram_out_of_the_megabyte_axis_and_the_zoom(page, alice, daphne, artifacts):
    rounds = [round_result(n, participation_histogram=[10 - 2 * n, 2 * n, 0]) for n in range(1, 6)]
    experiment = _finished(alice, rounds)
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('chart-participation').data !== undefined")
    histogram = "() => { const d = document.getElementById('chart-participation'); return [d.data[0].x.length, d.layout.xaxis.title.text]; }"  # noqa: E501
    before = page.evaluate(histogram)
    assert before == [3, "times sampled (after round 5)"]

    page.select_option("#x-axis", "mb")
    page.wait_for_function("() => document.getElementById('chart-loss').layout.xaxis.title.text.startsWith('MB')")
    assert page.evaluate(histogram) == before  # still its bars and its own axis title

    page.evaluate("() => Plotly.relayout('chart-loss', {'xaxis.range': [0.01, 0.03]})")
    page.wait_for_function("() => (document.getElementById('chart-accuracy').layout.xaxis.range || [])[1] === 0.03")
    page.evaluate("() => Plotly.relayout('chart-loss', {'xaxis.autorange': true})")  # the double-click reset
    page.wait_for_function("() => document.getElementById('chart-accuracy').layout.xaxis.autorange === true")
    # Zooming the histogram moves no other chart either.
    page.evaluate("() => Plotly.relayout('chart-participation', {'xaxis.range': [0.5, 1.5]})")
    page.evaluate("() => Plotly.relayout('chart-memory', {'xaxis.range': [0.02, 0.03]})")
    page.wait_for_function("() => (document.getElementById('chart-accuracy').layout.xaxis.range || [])[0] === 0.02")
    assert page.evaluate("() => document.getElementById('chart-participation').layout.xaxis.range") == [0.5, 1.5]
    assert page.evaluate("() => document.getElementById('chart-loss').layout.xaxis.range") == [0.02, 0.03]
    page.evaluate("() => Plotly.relayout('chart-participation', {'xaxis.autorange': true})")
    page.evaluate("() => Plotly.relayout('chart-memory', {'xaxis.autorange': true})")
    page.wait_for_function("() => document.getElementById('chart-loss').layout.xaxis.autorange === true")
    screenshot(page.locator(".charts"), artifacts, "charts-mb.png")
    assert page.errors == []


def test_it_smooths_a_constant_series_on_a_log_axis_that_keeps_its_tick_labels(page, alice, daphne, artifacts):
    # Bytes that triple each round: the cumulative right axis of the bandwidth chart spans decades.
    rounds = [round_result(n, participants=10, completed=10, bytes_up=3000 * 3**n, bytes_down=1000 * 3**n)
              for n in range(1, 9)]  # fmt: skip
    experiment = _finished(alice, rounds)
    log_in(page, f"http://{daphne}", "alice", "alice-password")
    page.goto(f"http://{daphne}/experiments/{experiment.pk}/")
    page.wait_for_function("() => document.getElementById('chart-participants').data !== undefined")
    page.fill("#smoothing", "0.6")
    page.dispatch_event("#smoothing", "input")
    page.check("#log-y")
    page.wait_for_function("() => document.getElementById('chart-participants').layout.yaxis.type === 'log'")

    sampled = page.evaluate(
        "() => document.getElementById('chart-participants').data.find(t => t.name === 'sampled').y"
    )
    assert sampled == [10] * 8  # not 9.999999999999998
    for chart, axis in (("chart-participants", "yaxis"), ("chart-bandwidth", "yaxis"), ("chart-bandwidth", "yaxis2"),
                        ("chart-loss", "yaxis")):  # fmt: skip
        ticks = _ticks(page, chart, axis)
        assert len(ticks) >= 2, (chart, axis, ticks)
        # Every label reads as the number at its place: no bare minor digits ("2", "3" at 20, 30).
        assert all(_reads_as_its_value(v, text) for v, text in ticks), (chart, axis, ticks)
    for chart in ("chart-loss", "chart-accuracy", "chart-memory", "chart-bandwidth", "chart-time", "chart-participants"):  # fmt: skip
        for ticks in ("ytick", "y2tick"):
            assert _overlapping_labels(page, chart, ticks) == 0, (chart, ticks)
    screenshot(page.locator(".charts"), artifacts, "charts-log.png")
    assert page.errors == []
