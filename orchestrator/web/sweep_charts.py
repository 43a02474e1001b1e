"""Charts of runs pooled by configuration: one mean line per configuration in a shaded ± std band
(the sweep page, and the compare page when the reader groups the runs), and the sweep's parallel
coordinates from the swept values to the final accuracy."""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict

import plotly.graph_objects as go

from orchestrator.web.charts import PALETTE, Chart, chart_layout, figure_json

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
    layout = chart_layout(chart, y_title=y_title, right_axis=False, empty=not any(c["x"] for c in curves))
    # The title above the legend, which sits just above the plot.
    layout["title"] = {"text": title, "x": 0, "y": 0.98, "yanchor": "top", "font": {"size": 13}}
    layout["margin"]["t"] = 72
    _whole_rounds(layout, curves)
    return figure_json(band_traces(curves), layout)


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
    layout = chart_layout(chart, y_title=y_title, right_axis=False, empty=not any(c["x"] for c in curves))
    layout["showlegend"] = False  # the page's shared legend names the configurations
    layout["uirevision"] = f"grouped-{chart.id}"
    _whole_rounds(layout, curves)
    figure = figure_json(band_traces(curves), layout)
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
    return figure_json([go.Parcoords(dimensions=dimensions, line=line)], layout)


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


FADED = ("stopped", "failed")


def rungs_figure(trials: list[dict], target: str, *, log_x: bool) -> dict:
    """A search's rungs: each configuration's value at each decision round it reached (and at its
    full length once completed), one line each; the stopped ones faded (``meta.faded``)."""
    traces = []
    for i, t in enumerate(trials):
        points = sorted(t["values"].items()) + ([(t["total"], t["value"])] if t["value"] is not None else [])
        faded = t["state"] in FADED
        traces.append(go.Scatter(
            x=[x for x, _ in points], y=[y for _, y in points], name=t["label"], mode="lines+markers",
            opacity=0.3 if faded else 1.0, line={"color": PALETTE[i % len(PALETTE)], "dash": "dot" if faded else "solid"},
            meta={"trial": t["number"], "state": t["state"], "faded": faded}, hovertemplate=f"{t['text']}<br>%{{y:.4f}}",
        ))  # fmt: skip
    chart = Chart("sweep-rungs", "Rungs", target, ())
    layout = chart_layout(chart, y_title=target, right_axis=False, empty=not any(t["values"] for t in trials))
    layout["title"] = {"text": f"{target} at each rung (stopped: faded)", "x": 0, "y": 0.98, "yanchor": "top",
                       "font": {"size": 13}}  # fmt: skip
    layout["margin"]["t"] = 72
    layout["hovermode"] = "closest"
    layout["xaxis"].update(title={"text": "round (rungs)"}, rangemode="normal")
    if log_x:
        layout["xaxis"]["type"] = "log"
    return figure_json(traces, layout)


def trials_figure(trials: list[dict], target: str, direction: str) -> dict:
    """TPE's trials in order: each one's value (its last decision value, faded, when it was stopped)
    and the best value so far among those trained in full."""
    xs, ys, faded, best, running = [], [], [], [], None
    better = max if direction == "maximize" else min
    for t in trials:
        last = t["value"] if t["value"] is not None else (t["values"][max(t["values"])] if t["values"] else None)
        if last is not None:
            xs.append(t["number"] + 1)
            ys.append(last)
            faded.append(t["value"] is None)
        if t["value"] is not None:
            running = t["value"] if running is None else better(running, t["value"])
        best.append(running)
    numbers = [t["number"] + 1 for t in trials]
    traces = [
        go.Scatter(x=xs, y=ys, mode="markers", name="trial", meta={"role": "trials", "faded": faded},
                   marker={"size": 9, "color": PALETTE[0], "opacity": [0.3 if f else 1.0 for f in faded]}),
        go.Scatter(x=numbers, y=best, mode="lines", name="best so far", line={"color": PALETTE[1], "shape": "hv"},
                   meta={"role": "best"}),
    ]  # fmt: skip
    chart = Chart("sweep-trials", "Trials", target, ())
    layout = chart_layout(chart, y_title=target, right_axis=False, empty=not xs)
    layout["xaxis"].update(title={"text": "trial"}, tick0=1, dtick=1)
    layout["hovermode"] = "closest"
    return figure_json(traces, layout)
