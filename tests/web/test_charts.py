"""The charts defined once (orchestrator/web/charts.py): what each trace reads from a round, and the
figures the dashboard, the compare page and the report draw."""

import pytest

from fedweb_engine.results.round_fields import MB, Formula
from orchestrator.experiments.leak import latest_leak_warnings
from orchestrator.experiments.models import Kind
from orchestrator.experiments.records import RoundMetric
from orchestrator.sweeps.stats import run_labels
from orchestrator.web.charts import CHARTS, EMPTY_TEXT, compare_charts, dashboard_charts, x_axes
from tests.factories import round_result
from tests.web.conftest import make_experiment


def _trace(figure: dict, name: str) -> dict:
    return next(t for t in figure["data"] if t["name"] == name)


def test_it_reads_sums_rates_and_running_totals_from_rounds():
    rounds = [round_result(1, bytes_up=1000, bytes_down=3000), round_result(2, bytes_up=2000, bytes_down=2000)]
    assert Formula(("bytes_up", "bytes_down"), scale=MB).points(rounds) == ([1, 2], [0.004, 0.004])
    assert Formula(("bytes_up", "bytes_down"), scale=MB, cumulative=True).points(rounds) == ([1, 2], [0.004, 0.008])
    assert Formula(("completed",), per="round_seconds").value(round_result(1, completed=4, round_seconds=0.5)) == 8.0
    assert Formula(("completed",), per="round_seconds").value(round_result(1, round_seconds=0.0)) is None


def test_it_keeps_one_point_per_round_that_has_a_value():
    rounds = [round_result(n, test_loss=None if n % 2 else 1.0 / n) for n in range(1, 6)]
    loss = dashboard_charts(rounds)["figures"]["chart-loss"]
    assert _trace(loss, "test loss")["x"] == [2, 4] and _trace(loss, "train loss")["x"] == [1, 2, 3, 4, 5]
    assert _trace(loss, "test loss")["meta"] == {
        "keys": ["test_loss"],
        "scale": 1.0,
        "per": "",
        "cumulative": False,
        "run": "",
    }


def test_it_hides_a_trace_until_it_has_a_point():
    memory = dashboard_charts([round_result(1), round_result(2)])["figures"]["chart-memory"]  # a CPU run
    shown = {t["name"]: (t["visible"], t["x"]) for t in memory["data"]}
    assert shown["host RSS"] == (True, [1, 2]) and shown["VRAM peak"] == (False, [])
    empty = dashboard_charts([])
    assert empty["last_round"] == 0 and not any(t["visible"] for t in empty["figures"]["chart-loss"]["data"])


def test_it_draws_the_bandwidth_beside_the_fp32_formula_on_two_axes():
    figure = dashboard_charts([round_result(1), round_result(2)])["figures"]["chart-bandwidth"]
    assert _trace(figure, "fp32 formula, this round")["y"] == [0.032, 0.032]
    total = _trace(figure, "Σ fp32 formula")
    assert total["y"] == [0.032, 0.064] and total["yaxis"] == "y2"
    # The formula counts down + up: the bars stack up and down so both read in the same units.
    assert figure["layout"]["yaxis2"]["overlaying"] == "y" and figure["layout"]["barmode"] == "stack"
    assert _trace(figure, "up: updates")["y"][0] + _trace(figure, "down: model")["y"][0] == 0.008
    # An overlaying axis would sync its ticks to the left axis' grid (10.49, 20.98); auto gives round ones.
    assert figure["layout"]["yaxis2"]["tickmode"] == "auto" and figure["layout"]["yaxis2"]["autorange"] is True
    assert "template" not in figure["layout"]  # plotly.js's defaults, no Python theme shipped to the page


def test_it_overlays_each_experiment_in_its_own_colour_on_the_compare_page():
    series = [
        {"id": 7, "name": "a", "rounds": [round_result(1), round_result(2)]},
        {"id": 9, "name": "b", "rounds": []},
    ]
    figures = compare_charts(series)["figures"]
    assert set(figures) == {f"cmp-{c.id}" for c in CHARTS}
    loss = figures["cmp-loss"]["data"]
    assert [(t["name"], t["opacity"], t["showlegend"]) for t in loss[:2]] == [
        ("a #7", 0.45, False),  # train loss: faint, out of the legend
        ("a #7", 1.0, True),
    ]
    assert loss[0]["line"]["color"] == loss[1]["line"]["color"] != loss[2]["line"]["color"]
    # Each experiment has its own dash too: an identical shorter run still shows over a longer one.
    assert loss[1]["line"]["dash"] != loss[3]["line"]["dash"]
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


def test_it_orders_the_compare_traces_longest_first_so_shorter_runs_draw_on_top():
    series = [{"id": 1, "name": "short", "rounds": [round_result(1)]}]
    series.append({"id": 2, "name": "long", "rounds": [round_result(n) for n in (1, 2, 3)]})
    accuracy = compare_charts(series)["figures"]["cmp-accuracy"]["data"]
    assert [t["name"] for t in accuracy] == ["long #2", "short #1"]
    assert [t["meta"]["run"] for t in accuracy] == ["2", "1"]


def test_it_gives_every_chart_a_legend_a_uirevision_and_whole_round_ticks():
    figures = dashboard_charts([round_result(1), round_result(2)])["figures"]
    for chart_id, figure in figures.items():
        layout = figure["layout"]
        assert layout["showlegend"] is True, chart_id  # the memory chart had none with one trace
        assert layout["uirevision"] == chart_id.removeprefix("chart-"), chart_id  # live updates keep the zoom
        assert layout["xaxis"]["tickformat"] == "d", chart_id
        assert "annotations" not in layout, chart_id


def test_it_says_so_on_every_chart_of_a_run_with_no_round_yet():
    for figure in dashboard_charts([])["figures"].values():
        assert figure["layout"]["annotations"][0]["text"] == EMPTY_TEXT


def test_it_charts_the_participants_of_each_round():
    rounds = [round_result(1, participants=10, completed=8, dropped=2), round_result(2, participants=12, completed=12)]
    figure = dashboard_charts(rounds)["figures"]["chart-participants"]
    assert _trace(figure, "sampled")["y"] == [10, 12] and _trace(figure, "completed")["y"] == [8, 12]
    assert _trace(figure, "dropped")["y"] == [2, 0]


def test_it_gives_the_page_each_round_s_wall_clock_seconds_and_megabytes_so_far():
    rounds = [round_result(1, round_seconds=2.0, bytes_up=1_000_000, bytes_down=3_000_000)]
    rounds.append(round_result(2, round_seconds=3.0, bytes_up=1_000_000, bytes_down=1_000_000))
    assert x_axes(rounds) == {"round": [1, 2], "seconds": [2.0, 5.0], "mb": [4.0, 6.0]}
    series = [{"id": 3, "name": "a", "rounds": rounds}]
    assert compare_charts(series)["x_axes"] == {"3": x_axes(rounds)}
    assert dashboard_charts(rounds)["x_axes"] == {"": x_axes(rounds)}


@pytest.mark.django_db
def test_it_labels_compared_runs_by_the_fields_that_differ_in_one_legend_for_the_page(alice_client, user):
    runs = [
        make_experiment(user, rounds=2, name=f"fedprox sweep run {i}", spec={"algorithm": {"name": "fedprox", "mu": mu},
                                                                              "seed": seed})
        for i, (mu, seed) in enumerate((m, s) for m in (0.01, 0.1, 1.0) for s in (0, 1))
    ]  # fmt: skip
    assert run_labels(runs)[:3] == ["mu=0.01 seed=0", "mu=0.01 seed=1", "mu=0.1 seed=0"]
    twins = [make_experiment(user, name="twin"), make_experiment(user, name="twin")]
    assert run_labels(twins) == [f"twin #{twins[0].pk}", f"twin #{twins[1].pk}"]  # nothing tells them apart

    # An external run's free-form config beside a native spec: only the fields both have make the label.
    external = make_experiment(user, name="flower run", spec={"framework": "flower", "rounds": 5, "lr": 0.1},
                               kind=Kind.EXTERNAL)  # fmt: skip
    native = make_experiment(user, name="native run", spec={"rounds": 6})
    assert run_labels([external, native]) == ["rounds=5", "rounds=6"]
    # More differing fields than a label can hold short: the runs' names.
    wide = [make_experiment(user, name=f"wide {i}", spec={"rounds": 3 + i, "seed": i, "local": {"lr": 0.1 * (i + 1),
            "epochs": i + 1, "batch_size": 10 + i}}) for i in range(2)]  # fmt: skip
    assert run_labels(wide) == [f"wide 0 #{wide[0].pk}", f"wide 1 #{wide[1].pk}"]

    charts = alice_client.get("/compare/?ids=" + ",".join(str(e.pk) for e in runs)).context["charts"]
    assert [item["label"] for item in charts["legend"]] == run_labels(runs)
    assert charts["legend"][0]["title"] == f"fedprox sweep run 0 #{runs[0].pk}"  # the full name as the tooltip
    for chart_id, figure in charts["figures"].items():
        assert figure["layout"]["showlegend"] is False, chart_id  # the page's legend, not one per chart
        assert {t["meta"]["legend"] for t in figure["data"]} == {str(e.pk) for e in runs}, chart_id


@pytest.mark.django_db
def test_it_draws_the_grouped_runs_as_mean_and_std_bands_per_configuration(alice_client, user):
    runs = [
        make_experiment(user, name="r", spec={"algorithm": {"name": "fedprox", "mu": mu}, "seed": seed})
        for mu in (0.1, 1.0) for seed in (0, 1)
    ]  # fmt: skip
    for e in runs:
        spread = 0.02 * e.spec["seed"]
        for n in (1, 2):
            mu = e.spec["algorithm"]["client"]["options"]["mu"]  # algorithm.mu is the fedprox client option now
            RoundMetric.record(e, round_result(n, test_accuracy=0.1 * n + mu / 10 + spread))
    charts = alice_client.get("/compare/?group=1&ids=" + ",".join(str(e.pk) for e in runs)).context["charts"]
    grouped = charts["figures"]["grp-accuracy"]
    assert grouped["own_x"] is True  # pooled runs share rounds, not MB or seconds
    means = {t["name"]: t for t in grouped["data"] if t["meta"]["role"] == "mean"}
    assert set(means) == {"mu=0.1", "mu=1.0"}
    assert means["mu=1.0"]["y"] == pytest.approx([0.21, 0.31]) and means["mu=1.0"]["meta"]["std"] == pytest.approx(
        [0.0141421, 0.0141421], rel=1e-4
    )
    assert sum(t["meta"]["role"] == "lower" and t["fill"] == "tonexty" for t in grouped["data"]) == 2
    assert {item["key"] for item in charts["legend"]} >= {"config:mu=0.1", "config:mu=1.0"}
    assert any(p["id"] == "grp-accuracy" for p in charts["panels"])


def test_it_keeps_the_participation_histogram_on_its_own_x_axis():
    rounds = [round_result(1, participation_histogram=[2, 3, 1])]
    charts = dashboard_charts(rounds)
    figure = charts["figures"]["chart-participation"]
    assert figure["own_x"] is True and figure["layout"]["xaxis"]["title"]["text"].startswith("times sampled")
    assert not any(f.get("own_x") for k, f in charts["figures"].items() if k != "chart-participation")


def test_it_splits_the_bandwidth_bars_into_the_model_and_what_travels_beside_it():
    # A SCAFFOLD round: 3 MB of fp16 model down and 4 MB of fp32 control variates beside it.
    scaffold = round_result(
        1, bytes_down=7_000_000, bytes_extra_down=4_000_000, bytes_up=5_000_000, bytes_extra_up=4_000_000
    )
    figure = dashboard_charts([scaffold])["figures"]["chart-bandwidth"]
    assert _trace(figure, "down: model")["y"] == [3.0] and _trace(figure, "down: beside the model (fp32)")["y"] == [4.0]
    assert _trace(figure, "up: updates")["y"] == [1.0] and _trace(figure, "up: beside the updates (fp32)")["y"] == [4.0]
    plain = dashboard_charts([round_result(1, bytes_extra_down=0, bytes_extra_up=0)])["figures"]["chart-bandwidth"]
    assert _trace(plain, "down: beside the model (fp32)")["visible"] is False  # FedAvg sends nothing beside it
    old = dashboard_charts([round_result(1, bytes_extra_down=None)])["figures"]["chart-bandwidth"]
    assert _trace(old, "down: model")["y"] == [0.004]  # a round recorded before the split: all of it is the model
    panel = next(p for p in dashboard_charts([scaffold])["panels"] if p["id"] == "chart-bandwidth")
    assert "fp32 formula: the same round uncompressed" in panel["note"] and "Σ lines" in panel["note"]
