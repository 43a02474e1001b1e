"""Charts of runs pooled by configuration: one mean line per configuration in a shaded ± std band
(the sweep page, and the compare page when the reader groups the runs), and the sweep's parallel
coordinates from the swept values to the final accuracy."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict

import plotly.graph_objects as go

from orchestrator.web.charts import PALETTE, Chart, _figure_json, _layout

# A swept numeric field with at most this many distinct values gets one tick per value.
MAX_VALUE_TICKS = 12
NO_TARGET_TEXT = "Parallel coordinates appear once a run has completed with a final accuracy."


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def band_traces(curves: list[dict]) -> list:
    """For each configuration (``{"label", "x", "mean", "std"}``) a mean line (``meta.role`` "mean")
    over a shaded band from mean - std to mean + std (two traces, "upper" and "lower", out of the
    legend). ``meta.legend`` names the configuration (the compare page's shared legend hides by it)."""
    traces = []
    for i, c in enumerate(curves):
        color = PALETTE[i % len(PALETTE)]
        upper = [m + s for m, s in zip(c["mean"], c["std"], strict=True)]
        lower = [m - s for m, s in zip(c["mean"], c["std"], strict=True)]
        common = {"x": c["x"], "legendgroup": c["label"], "hoverinfo": "skip", "showlegend": False}
        key = f"config:{c['label']}"
        traces.append(go.Scatter(y=upper, mode="lines", line={"width": 0}, meta={"role": "upper", "legend": key},
                                 **common))  # fmt: skip
        traces.append(go.Scatter(y=lower, mode="lines", line={"width": 0}, fill="tonexty",
                                 fillcolor=_rgba(color, 0.18), meta={"role": "lower", "legend": key}, **common))  # fmt: skip
        traces.append(go.Scatter(
            x=c["x"], y=c["mean"], name=c["label"], legendgroup=c["label"], mode="lines+markers",
            line={"color": color, "width": 2}, marker={"size": 4},
            meta={"role": "mean", "std": c["std"], "legend": key},
        ))  # fmt: skip
    return traces


def band_figure(title: str, y_title: str, curves: list[dict]) -> dict:
    """One chart of a sweep's metric: ``band_traces`` of its configurations, titled."""
    chart = Chart(f"sweep-{title}", title, y_title, ())
    layout = _layout(chart, y_title=y_title, right_axis=False, empty=not any(c["x"] for c in curves))
    # The title above the legend, which sits just above the plot.
    layout["title"] = {"text": title, "x": 0, "y": 0.98, "yanchor": "top", "font": {"size": 13}}
    layout["margin"]["t"] = 72
    _whole_rounds(layout, curves)
    return _figure_json(band_traces(curves), layout)


def _whole_rounds(layout: dict, curves: list[dict]) -> None:
    """One tick per round while there are few ("d" alone gives 0 1 1 2 2 3 on three rounds)."""
    last = max((c["x"][-1] for c in curves if c["x"]), default=0)
    if last <= 10:
        layout["xaxis"].update(tick0=0, dtick=1)


def grouped_figure(chart: Chart, groups: list[dict], rounds_by_id: dict[int, list[dict]]) -> dict:
    """The compare chart ``chart`` with the runs pooled by configuration (``groups``: rows of
    ``sweep_stats.group``): per round, the mean ± std over the runs of its main ("solid") trace.
    Its x is always the round (pooled runs have no common MB or seconds axis), so the figure says
    ``own_x``: the page keeps it out of the x-axis choice and the linked zoom."""
    main = next(t for t in chart.traces if t.compare == "solid")
    curves = []
    for row in groups:
        per_round: dict[int, list[float]] = defaultdict(list)
        for e in row["runs"]:
            for x, y in zip(*main.series.points(rounds_by_id.get(e.pk, [])), strict=True):
                per_round[x].append(y)
        xs = sorted(per_round)
        means = [statistics.fmean(per_round[x]) for x in xs]
        stds = [statistics.stdev(per_round[x]) if len(per_round[x]) > 1 else 0.0 for x in xs]
        curves.append({"label": row["label"], "x": xs, "mean": means, "std": stds})
    y_title = chart.y2_title if main.right_axis else chart.y_title
    layout = _layout(chart, y_title=y_title, right_axis=False, empty=not any(c["x"] for c in curves))
    layout["showlegend"] = False  # the page's shared legend names the configurations
    layout["uirevision"] = f"grouped-{chart.id}"
    _whole_rounds(layout, curves)
    figure = _figure_json(band_traces(curves), layout)
    figure["own_x"] = True
    return figure


def _number(v: float) -> str:
    """A tick label: whole numbers as such, others with at most 4 significant digits."""
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:.4g}"


def _dimension(field: str, values: list) -> dict:
    """One parcoords axis. Few distinct numbers (a swept grid: 0, 0.01, 0.1, 1) sit at evenly spaced
    places in their order, each ticked with its formatted value (on a linear scale 0 and 0.01 would
    overlap); more numbers get a linear axis, whole-number fields with integer ticks; text (or
    mixed) values are categories with one tick per name."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        distinct = sorted(set(values))
        if len(distinct) <= MAX_VALUE_TICKS:
            places = list(range(len(distinct)))
            return {"label": field, "values": [distinct.index(v) for v in values], "tickvals": places,
                    "ticktext": [_number(v) for v in distinct], "range": [-0.25, max(len(distinct) - 0.75, 0.25)]}  # fmt: skip
        whole = all(float(v).is_integer() for v in distinct)
        return {"label": field, "values": values, "tickformat": ",d" if whole else "~g"}
    names = sorted({json.dumps(v) for v in values})
    return {"label": field, "values": [names.index(json.dumps(v)) for v in values],
            "tickvals": list(range(len(names))), "ticktext": names}  # fmt: skip


def parallel_figure(fields: list[str], rows: list[dict], target: str = "final accuracy") -> dict | None:
    """Parallel coordinates: one line per run that has a ``target`` value, from its swept values
    (``rows``: {"values": {field: value}, "target": float | None}) to the target. None while no run
    has one: a run with no result yet has no place on the target axis (not 0)."""
    scored = [r for r in rows if r["target"] is not None and math.isfinite(r["target"])]
    if not scored:
        return None
    dimensions = [_dimension(field, [r["values"].get(field) for r in scored]) for field in fields]
    scores = [r["target"] for r in scored]
    low, high = min(scores), max(scores)
    if low == high:
        low, high = low - 0.01, high + 0.01
    dimensions.append({"label": target, "values": scores, "range": [low, high], "tickformat": ".3f"})
    colorbar = {"title": {"text": target}, "tickformat": ".3f"}
    line = {
        "color": scores,
        "colorscale": "Viridis",
        "cmin": low,
        "cmax": high,
        "showscale": True,
        "colorbar": colorbar,
    }
    layout = {"margin": {"l": 70, "r": 90, "t": 50, "b": 30}, "font": {"size": 12}, "paper_bgcolor": "#fff"}
    return _figure_json([go.Parcoords(dimensions=dimensions, line=line)], layout)


def grouped_charts(charts: list[Chart], groups: list[dict], rounds_by_id: dict[int, list[dict]]) -> dict:
    """The compare page's grouped panels: each of ``charts`` drawn as mean ± std per configuration,
    and the shared legend's entries for the configurations (keyed ``config:<label>``)."""
    legend = [{"key": f"config:{row['label']}", "label": row["label"], "color": PALETTE[i % len(PALETTE)],
               "dash": "solid", "title": f"{len(row['runs'])} runs: mean ± std"} for i, row in enumerate(groups)]  # fmt: skip
    return {
        "legend": legend,
        "panels": [{"id": f"grp-{c.id}", "title": f"{c.compare_title}: mean ± std per configuration"} for c in charts],
        "figures": {f"grp-{c.id}": grouped_figure(c, groups, rounds_by_id) for c in charts},
    }
