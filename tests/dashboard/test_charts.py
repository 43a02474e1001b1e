"""The charts defined once (orchestrator/charts.py): what each trace reads from a round, and the
figures the dashboard, the compare page and the report draw."""

import pytest

from orchestrator.charts import CHARTS, MB, Series, compare_charts, dashboard_charts
from orchestrator.leak import latest_leak_warnings
from orchestrator.models import RoundMetric
from tests.dashboard.conftest import make_experiment
from tests.factories import round_result


def _trace(figure: dict, name: str) -> dict:
    return next(t for t in figure["data"] if t["name"] == name)


def test_it_reads_sums_rates_and_running_totals_from_rounds():
    rounds = [round_result(1, bytes_up=1000, bytes_down=3000), round_result(2, bytes_up=2000, bytes_down=2000)]
    assert Series(("bytes_up", "bytes_down"), scale=MB).points(rounds) == ([1, 2], [0.004, 0.004])
    assert Series(("bytes_up", "bytes_down"), scale=MB, cumulative=True).points(rounds) == ([1, 2], [0.004, 0.008])
    assert Series(("completed",), per="round_seconds").value(round_result(1, completed=4, round_seconds=0.5)) == 8.0
    assert Series(("completed",), per="round_seconds").value(round_result(1, round_seconds=0.0)) is None


def test_it_keeps_one_point_per_round_that_has_a_value():
    rounds = [round_result(n, test_loss=None if n % 2 else 1.0 / n) for n in range(1, 6)]
    loss = dashboard_charts(rounds)["figures"]["chart-loss"]
    assert _trace(loss, "test loss")["x"] == [2, 4] and _trace(loss, "train loss")["x"] == [1, 2, 3, 4, 5]
    assert _trace(loss, "test loss")["meta"] == {"keys": ["test_loss"], "scale": 1.0, "per": "", "cumulative": False}


def test_it_hides_a_trace_until_it_has_a_point():
    memory = dashboard_charts([round_result(1), round_result(2)])["figures"]["chart-memory"]  # a CPU run
    shown = {t["name"]: (t["visible"], t["x"]) for t in memory["data"]}
    assert shown["host RSS"] == (True, [1, 2]) and shown["VRAM peak"] == (False, [])
    empty = dashboard_charts([])
    assert empty["last_round"] == 0 and not any(t["visible"] for t in empty["figures"]["chart-loss"]["data"])


def test_it_draws_the_bandwidth_beside_the_fp32_formula_on_two_axes():
    figure = dashboard_charts([round_result(1), round_result(2)])["figures"]["chart-bandwidth"]
    assert _trace(figure, "fp32 formula")["y"] == [0.032, 0.032]
    assert _trace(figure, "Σ formula")["y"] == [0.032, 0.064] and _trace(figure, "Σ formula")["yaxis"] == "y2"
    assert figure["layout"]["yaxis2"]["overlaying"] == "y" and figure["layout"]["barmode"] == "group"
    assert "template" not in figure["layout"]  # plotly.js's defaults, no Python theme shipped to the page


def test_it_overlays_each_experiment_in_its_own_colour_on_the_compare_page():
    series = [
        {"id": 7, "name": "a", "rounds": [round_result(1), round_result(2)]},
        {"id": 9, "name": "b", "rounds": []},
    ]
    figures = compare_charts(series)["figures"]
    assert set(figures) == {f"cmp-{c.id}" for c in CHARTS}
    loss = figures["cmp-loss"]["data"]
    assert [(t["name"], t["line"]["dash"], t["showlegend"]) for t in loss[:2]] == [
        ("a #7", "dot", False),  # train loss: dotted, out of the legend
        ("a #7", "solid", True),
    ]
    assert loss[0]["line"]["color"] == loss[1]["line"]["color"] != loss[2]["line"]["color"]
    bandwidth = figures["cmp-bandwidth"]
    assert bandwidth["data"][0]["y"] == [0.008, 0.016] and bandwidth["data"][0]["yaxis"] == "y"
    assert bandwidth["layout"]["yaxis"]["title"]["text"] == "MB since round 1 (Σ)"


@pytest.mark.django_db
def test_it_gives_the_leak_verdict_from_the_rounds_in_the_database(user):
    experiment = make_experiment(user, rounds=12)
    assert latest_leak_warnings(experiment.pk) == []  # flat RSS
    for n in range(13, 45):
        RoundMetric.record(experiment, round_result(n, rss_mb=500.0 + 20 * n))
    warnings = latest_leak_warnings(experiment.pk)
    assert len(warnings) == 1 and warnings[0].startswith("Host RSS grows 20.0 MB per round")
