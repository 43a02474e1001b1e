"""The charts of a run, defined once: the live dashboard, the compare page and the offline report
all draw the figures built here with ``plotly.graph_objects``.

The charts and their traces are declared with the round's fields (``fedweb_engine/results/round_fields.py``:
each field's ``Plot``s, the ``CHARTS`` frames); this module turns them into figures. Each trace
carries, in its ``meta``, the ``Formula`` that reads its y value from a ``RoundResult``, as data.
The server builds a page's figures from the rounds in the database; the page's script draws them
and, as rounds arrive on the WebSocket, appends each round's point by evaluating that same data
(``static/js/charts.js``, ``append``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import plotly.graph_objects as go

from fedweb_engine.results import round_fields
from fedweb_engine.results.round_fields import X_AXES, Formula

PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#db2777", "#4b5563"]
GRID = "#eef0f3"


@dataclass(frozen=True)
class Trace:
    name: str
    series: Formula
    color: str
    kind: str = "line"  # "line" (lines and markers), "plain" (lines only) or "bar"
    dash: str = "solid"
    right_axis: bool = False
    compare: str = ""  # on the compare page, once per experiment: "solid" (bold, in the legend) or "dot" (faint)
    fill: str = ""  # "tonexty": shade down to the previous trace (a quantile band)


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    y_title: str
    traces: tuple[Trace, ...]
    compare_title: str = ""
    y2_title: str = ""
    y_range: tuple[float, float] | None = None
    barmode: str = ""
    optional: str = ""  # drawn only for runs that record this field (or whose spec plans it)
    note: str = ""  # what its traces are, under it


def _chart(frame: round_fields.Chart) -> Chart:
    """A declared chart frame with the traces its fields' plots declare."""
    traces = tuple(
        Trace(p.name, round_fields.plot_formula(f, p), p.color, p.kind, p.dash, p.right_axis, p.compare, p.fill)
        for f, p in round_fields.plots_of(frame.id)
    )
    return Chart(frame.id, frame.title, frame.y_title, traces, frame.compare_title, frame.y2_title, frame.y_range,
                 frame.barmode, frame.optional, frame.note)  # fmt: skip


_ALL = tuple(_chart(c) for c in round_fields.charts())
CHARTS: tuple[Chart, ...] = tuple(c for c in _ALL if not c.optional)  # every run's
# Shown only for runs that record them (federated evaluation, DP, fields added later): see _charts_for.
CLIENT_CHARTS: tuple[Chart, ...] = tuple(c for c in _ALL if c.optional)
# On the compare page each experiment gets its own colour and dash, so that an identical shorter run
# still shows over a longer one (the shorter runs are also drawn last, on top).
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# The shared legend's swatch is a CSS border: the nearest CSS style to each plotly dash.
CSS_DASH = {"solid": "solid", "dash": "dashed", "dot": "dotted", "dashdot": "dashed", "longdash": "dashed",
            "longdashdot": "dashed"}  # fmt: skip
EMPTY_TEXT = "No rounds yet: the charts fill in as rounds finish."


# Whether a run's spec plans a chart's field, so that the chart is there from round 0. A chart not
# named here is planned for any engine run (it has a spec) until its first round says otherwise.
_PLANNED = {
    "clients": lambda spec: (spec.get("evaluation") or {}).get("clients", "none") != "none",
    "client-loss": bool,
    "privacy": lambda spec: (spec.get("privacy") or {}).get("mechanism", "none") != "none",
}


def _charts_for(rounds: list[dict], spec: dict | None = None) -> list[Chart]:
    spec = spec or {}

    def planned(chart: Chart) -> bool:
        return _PLANNED[chart.id](spec) if chart.id in _PLANNED else bool(spec) and not rounds

    recorded = [c for c in CLIENT_CHARTS if planned(c) or any(r.get(c.optional) is not None for r in rounds)]
    return [*CHARTS, *recorded]


def participation_figure(rounds: list[dict]) -> dict | None:
    """Bars: how many clients have been sampled 0, 1, 2, … times, as of the last round that says."""
    last = next((r for r in reversed(rounds) if r.get("participation_histogram")), None)
    if last is None:
        return None
    counts = last["participation_histogram"]
    labels = [str(k) for k in range(len(counts) - 1)] + [f"{len(counts) - 1}+"]
    # A recipe no round matches: the page's live updates leave this snapshot alone.
    bars = go.Bar(x=labels, y=counts, name="clients", marker={"color": "#0891b2"}, meta=Formula(("-",)).as_data())
    layout = chart_layout(Chart("participation", "", "clients", ()), y_title="clients", right_axis=False, empty=False)
    layout["xaxis"] = {"title": {"text": f"times sampled (after round {last['round']})"}, "type": "category"}
    figure = figure_json([bars], layout)
    # Its x is "times sampled", not rounds: the page keeps it out of the x-axis choice and the linked zoom.
    figure["own_x"] = True
    return figure


def _trace(trace: Trace, rounds: list[dict], **style) -> go.BaseTraceType:
    xs, ys = trace.series.points(rounds)
    common = {
        "name": style.pop("name", trace.name),
        "x": xs,
        "y": ys,
        # run: whose x axes; legend: what the compare page's shared legend hides it by
        "meta": {**trace.series.as_data(), "run": (run := style.pop("run", "")), **({"legend": run} if run else {})},
        # A trace with no point yet stays out of the legend (VRAM on a CPU run); the page shows it
        # once a round gives it one.
        "visible": bool(xs),
        "yaxis": "y2" if style.pop("right_axis", trace.right_axis) else "y",
    }
    color, dash = style.pop("color", trace.color), style.pop("dash", trace.dash)
    width = style.pop("width", 2)
    if trace.kind == "bar":
        return go.Bar(marker={"color": color}, **common, **style)
    if trace.fill:
        style["fill"], style["fillcolor"] = trace.fill, color
    mode = "lines+markers" if trace.kind == "line" else "lines"
    line = {"color": color, "width": width, "dash": dash}
    return go.Scatter(mode=mode, line=line, marker={"size": 5}, **common, **style)


def chart_layout(chart: Chart, *, y_title: str, right_axis: bool, empty: bool) -> dict:
    """The Plotly layout every FedWeb chart shares (rounds on x, ``chart``'s axes, a note when ``empty``)."""
    yaxis = {"title": {"text": y_title}, "gridcolor": GRID, "rangemode": "tozero"}
    if chart.y_range:
        yaxis["range"] = list(chart.y_range)
    layout = {
        "margin": {"l": 56, "r": 56 if right_axis else 20, "t": 34, "b": 40},
        "hovermode": "x unified",
        # Every chart keeps its legend, even with one trace: the reader sees what the line is.
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        "font": {"size": 12},
        # Whole rounds only: early rounds would otherwise get ticks at 1.5, 2.5 (the page sets dtick).
        "xaxis": {"title": {"text": "round"}, "rangemode": "tozero", "gridcolor": GRID, "tickformat": "d"},
        "yaxis": yaxis,
        "paper_bgcolor": "#fff",
        "plot_bgcolor": "#fff",
        # Live updates redraw with Plotly.react; an unchanged uirevision keeps the user's zoom.
        "uirevision": chart.id,
    }
    if right_axis:
        # An overlaying axis defaults to tickmode "sync" (ticks at the left axis' grid lines: 10.49,
        # 20.98); "auto" gives round numbers and a range that holds the whole line.
        y2 = {"title": {"text": chart.y2_title}, "overlaying": "y", "side": "right", "rangemode": "tozero"}
        layout["yaxis2"] = {**y2, "showgrid": False, "tickmode": "auto", "autorange": True}
    if chart.barmode:
        layout["barmode"] = chart.barmode
    if empty:
        layout["annotations"] = [
            {"text": EMPTY_TEXT, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5}
        ]
    return layout


def figure_json(traces: list, layout: dict) -> dict:
    """``{"data", "layout"}`` as plotly.js takes it, from Plotly traces and a layout."""
    figure = json.loads(go.Figure(data=traces, layout=layout).to_json())
    figure["layout"].pop("template", None)  # plotly.js's own defaults, as the pages always had
    return figure


def dashboard_figure(chart: Chart, rounds: list[dict]) -> dict:
    """``{"data", "layout"}`` of one dashboard chart for a run's rounds (``RoundResult`` dicts)."""
    traces = [_trace(t, rounds) for t in chart.traces]
    layout = chart_layout(chart, y_title=chart.y_title, right_axis=bool(chart.y2_title), empty=not rounds)
    return figure_json(traces, layout)


def compare_figure(chart: Chart, series: list[dict]) -> dict:
    """One chart with the compare traces of each experiment of ``series`` (``{"id", "name", "rounds"}``
    and an optional short ``label``), one colour and one dash per experiment, the shorter runs drawn
    last (on top); the secondary trace ("dot") is faint. Every trace is on the left axis (there is
    one quantity per chart). The figure has no legend of its own: the page shows one legend for all
    its charts (``compare_charts``'s ``legend``), which hides a run by its ``meta.legend``."""
    picked = [t for t in chart.traces if t.compare]
    order = sorted(range(len(series)), key=lambda i: -len(series[i]["rounds"]))
    traces = []
    for i in order:
        s = series[i]
        for t in picked:
            main = t.compare == "solid"
            style = {"name": _label(s), "legendgroup": str(s["id"]), "right_axis": False}
            style.update(color=PALETTE[i % len(PALETTE)], dash=DASHES[i % len(DASHES)], showlegend=main)
            style.update(run=str(s["id"]), width=2.5 if main else 1.5, opacity=1.0 if main else 0.45)
            traces.append(_trace(t, s["rounds"], **style))
    main = next(t for t in picked if t.compare == "solid")
    y_title = chart.y2_title if main.right_axis else chart.y_title
    empty = not any(s["rounds"] for s in series)
    layout = chart_layout(chart, y_title=y_title, right_axis=False, empty=empty)
    # Six runs' legend took 60% of each panel (and scrolled): the page's shared legend replaces it.
    layout["showlegend"] = False
    layout["margin"]["t"] = 12
    return figure_json(traces, layout)


def _label(s: dict) -> str:
    return s.get("label") or f"{s['name']} #{s['id']}"


def compare_chart_list(series: list[dict]) -> list[Chart]:
    """The charts the compare page draws for ``series``: those with a compare trace that any run fills."""
    shown = _charts_for([r for s in series for r in s["rounds"]])
    return [c for c in shown if any(t.compare for t in c.traces)]


def x_axes(rounds: list[dict]) -> dict:
    """Per round, the x values of the other axes the reader can pick: the wall-clock seconds of the
    rounds so far (Σ round time) and the MB communicated so far (up + down)."""
    seconds = X_AXES["seconds"].points(rounds)
    return {"round": seconds[0], **{name: formula.points(rounds)[1] for name, formula in X_AXES.items()}}


def x_formulas() -> dict:
    """``X_AXES`` as data: the page's script extends each x axis with the rounds that arrive live."""
    return {name: formula.as_data() for name, formula in X_AXES.items()}


def dashboard_charts(rounds: list[dict], spec: dict | None = None) -> dict:
    """What the dashboard and the report need to draw and extend their charts (the
    ``charts-data`` script): each chart's figure, and the progress the ETA is computed from.
    With the run's ``spec``, the per-client and privacy charts it will fill are there from round 0.
    Without one (an external run: a script reports what it measured, often no memory or bytes), a
    chart none of whose values the run reported is ``hidden`` instead of an empty frame; the page
    shows it once a round brings one (``static/js/charts.js``) and names the others meanwhile."""
    charts = _charts_for(rounds, spec)
    figures = {f"chart-{c.id}": dashboard_figure(c, rounds) for c in charts}
    panels = [
        {
            "id": f"chart-{c.id}",
            "title": c.title,
            "memory": c.id == "memory",
            "note": c.note,
            "hidden": spec is None and not any(t["x"] for t in figures[f"chart-{c.id}"]["data"]),
        }
        for c in charts
    ]
    participation = participation_figure(rounds)
    if participation is not None:
        panels.append(
            {"id": "chart-participation", "title": "Participation per client", "memory": False, "hidden": False}
        )
        figures["chart-participation"] = participation
    return {
        "panels": panels,
        "unreported": [p["title"] for p in panels if p["hidden"]],
        "figures": figures,
        "last_round": rounds[-1]["round"] if rounds else 0,
        "rounds": len(rounds),
        "round_seconds": sum(r["round_seconds"] or 0.0 for r in rounds),
        "timed_rounds": sum(1 for r in rounds if r.get("round_seconds") is not None),
        "x_axes": {"": x_axes(rounds)},
        "x_formulas": x_formulas(),
    }


def compare_charts(series: list[dict]) -> dict:
    """The compare page's figures: the same charts, one colour per experiment, and the page's one
    legend (``{"key", "label", "title", "color", "dash"}`` per experiment: its short label, its full
    name as the tooltip)."""
    charts = compare_chart_list(series)
    legend = [{"key": str(s["id"]), "label": _label(s), "title": f"{s['name']} #{s['id']}",
               "color": PALETTE[i % len(PALETTE)], "dash": CSS_DASH[DASHES[i % len(DASHES)]]} for i, s in enumerate(series)]  # fmt: skip
    return {
        "legend": legend,
        "panels": [{"id": f"cmp-{c.id}", "title": c.compare_title, "note": ""} for c in charts],
        "figures": {f"cmp-{c.id}": compare_figure(c, series) for c in charts},
        "x_axes": {str(s["id"]): x_axes(s["rounds"]) for s in series},
        "x_formulas": x_formulas(),
    }
