"""The charts of a run, defined once: the live dashboard, the compare page and the offline report
all draw the figures built here with ``plotly.graph_objects``.

Each trace carries, in its ``meta``, the recipe that reads its y value from a ``RoundResult``
(``Series``). The server builds a page's figures from the rounds in the database; the page's
script only draws them and, as rounds arrive on the WebSocket, appends each round's point by
reading the same recipe (``static/js/experiment_detail.js``, ``appendRounds``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import plotly.graph_objects as go

MB = 1e-6  # bytes -> MB
PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#db2777", "#4b5563"]
GRID = "#eef0f3"


@dataclass(frozen=True)
class Series:
    """How a trace reads one round: the sum of ``keys`` (None if any is missing), divided by ``per``
    (None unless it is > 0), times ``scale``; with ``cumulative``, added to the previous point."""

    keys: tuple[str, ...]
    scale: float = 1.0
    per: str = ""
    cumulative: bool = False

    def value(self, result: dict) -> float | None:
        values = [result.get(key) for key in self.keys]
        if any(v is None for v in values):
            return None
        total = float(sum(values))
        if self.per:
            divisor = result.get(self.per)
            if not divisor or divisor <= 0:
                return None
            total /= divisor
        return total * self.scale

    def points(self, rounds: list[dict]) -> tuple[list[int], list[float]]:
        """One point per round that has a value (evaluation may skip rounds)."""
        xs, ys, running = [], [], 0.0
        for result in rounds:
            y = self.value(result)
            if y is None:
                continue
            running = running + y if self.cumulative else y
            xs.append(result["round"])
            ys.append(running)
        return xs, ys

    def meta(self) -> dict:
        return {"keys": list(self.keys), "scale": self.scale, "per": self.per, "cumulative": self.cumulative}


@dataclass(frozen=True)
class Trace:
    name: str
    series: Series
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


def _mb(*keys: str, cumulative: bool = False) -> Series:
    return Series(keys, scale=MB, cumulative=cumulative)


CHARTS: tuple[Chart, ...] = (
    Chart("loss", "Loss", "loss", (
        Trace("train loss", Series(("train_loss",)), "#2563eb", compare="dot"),
        Trace("test loss", Series(("test_loss",)), "#dc2626", compare="solid"),
    ), compare_title="Test loss (bold) and train loss (faint)"),
    Chart("accuracy", "Test accuracy", "accuracy", (
        Trace("test accuracy", Series(("test_accuracy",)), "#16a34a", compare="solid"),
    ), compare_title="Test accuracy", y_range=(0.0, 1.0)),
    Chart("memory", "Memory per round", "MB", (
        Trace("host RSS", Series(("rss_mb",)), "#0891b2", compare="solid"),
        Trace("VRAM allocated", Series(("vram_allocated_mb",)), "#7c3aed"),
        Trace("VRAM reserved", Series(("vram_reserved_mb",)), "#a78bfa", dash="dot"),
        Trace("VRAM peak", Series(("vram_peak_mb",)), "#db2777", compare="dot"),
    ), compare_title="Memory: host RSS (bold) and VRAM peak (faint)"),
    # The fp32 formula counts down + up for the whole cohort, so the bars stack up and down to the same total.
    Chart("bandwidth", "Bandwidth", "MB per round, up + down", (
        Trace("up", _mb("bytes_up"), "#ea580c", kind="bar"),
        Trace("down", _mb("bytes_down"), "#2563eb", kind="bar"),
        Trace("fp32 formula", _mb("bytes_formula"), "#6b7280", kind="plain", dash="dash"),
        Trace("Σ measured", _mb("bytes_up", "bytes_down", cumulative=True), "#111827", kind="plain",
              right_axis=True, compare="solid"),
        Trace("Σ formula", _mb("bytes_formula", cumulative=True), "#6b7280", kind="plain", dash="dot",
              right_axis=True),
    ), compare_title="Cumulative bandwidth, up + down", y2_title="MB since round 1 (Σ)", barmode="stack"),
    Chart("time", "Round time and throughput", "seconds", (
        Trace("round seconds", Series(("round_seconds",)), "#0f766e", compare="solid"),
        Trace("clients / s", Series(("completed",), per="round_seconds"), "#9333ea", right_axis=True),
    ), compare_title="Round time (seconds)", y2_title="clients / s"),
    Chart("participants", "Participants per round", "clients", (
        Trace("sampled", Series(("participants",)), "#2563eb", kind="plain"),
        Trace("completed", Series(("completed",)), "#16a34a", compare="solid"),
        Trace("stragglers", Series(("stragglers",)), "#ea580c", kind="plain", dash="dash"),
        Trace("dropped", Series(("dropped",)), "#dc2626", kind="plain", dash="dot"),
    ), compare_title="Clients aggregated per round"),
)  # fmt: skip
# On the compare page each experiment gets its own colour and dash, so that an identical shorter run
# still shows over a longer one (the shorter runs are also drawn last, on top).
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# The shared legend's swatch is a CSS border: the nearest CSS style to each plotly dash.
CSS_DASH = {"solid": "solid", "dash": "dashed", "dot": "dotted", "dashdot": "dashed", "longdash": "dashed",
            "longdashdot": "dashed"}  # fmt: skip
EMPTY_TEXT = "No rounds yet: the charts fill in as rounds finish."


def _band(prefix: str, color: str, shade: str) -> tuple[Trace, ...]:
    """p10–p90 and p25–p75 bands and the median of ``prefix_pNN`` fields (RoundResult's quantiles)."""

    def q(n: int, fill: str = "", **kw) -> Trace:
        return Trace(f"p{n}", Series((f"{prefix}_p{n}",)), shade, kind="plain", fill=fill, **kw)

    return (q(10), q(90, "tonexty"), q(25), q(75, "tonexty"), Trace("median", Series((f"{prefix}_p50",)), color))


# Shown only for runs that record them (federated evaluation, DP): see _charts_for.
CLIENT_CHARTS: tuple[Chart, ...] = (
    Chart("clients", "Per-client accuracy (own test data)", "accuracy", (
        *_band("client_accuracy", "#16a34a", "rgba(22,163,74,0.25)"),
        Trace("mean", Series(("client_accuracy_mean",)), "#2563eb", compare="solid"),
        Trace("worst 10% mean", Series(("client_accuracy_worst10",)), "#dc2626", compare="dot"),
    ), compare_title="Per-client accuracy: mean (solid) and worst 10% (dotted)", y_range=(0.0, 1.0)),
    Chart("client-loss", "Per-client training loss", "loss", (
        *_band("train_loss", "#2563eb", "rgba(37,99,235,0.2)"),
    )),
    Chart("privacy", "Privacy spent", "ε", (
        Trace("ε", Series(("dp_epsilon",)), "#9333ea", compare="solid"),
        Trace("clip norm C", Series(("dp_clip_norm",)), "#6b7280", kind="plain", dash="dash", right_axis=True),
    ), compare_title="Privacy spent (ε)", y2_title="clip norm C"),
)  # fmt: skip
# A chart is drawn when a round has its key (or the spec says the run will record it).
_SHOWN_BY = {"clients": "client_accuracy_mean", "client-loss": "train_loss_p50", "privacy": "dp_epsilon"}


def _charts_for(rounds: list[dict], spec: dict | None = None) -> list[Chart]:
    spec = spec or {}
    planned = {
        "clients": (spec.get("evaluation") or {}).get("clients", "none") != "none",
        "client-loss": bool(spec),
        "privacy": (spec.get("privacy") or {}).get("mechanism", "none") != "none",
    }
    extra = [c for c in CLIENT_CHARTS if planned[c.id] or any(r.get(_SHOWN_BY[c.id]) is not None for r in rounds)]
    return [*CHARTS, *extra]


def participation_figure(rounds: list[dict]) -> dict | None:
    """Bars: how many clients have been sampled 0, 1, 2, … times, as of the last round that says."""
    last = next((r for r in reversed(rounds) if r.get("participation_histogram")), None)
    if last is None:
        return None
    counts = last["participation_histogram"]
    labels = [str(k) for k in range(len(counts) - 1)] + [f"{len(counts) - 1}+"]
    # A recipe no round matches: the page's live updates leave this snapshot alone.
    bars = go.Bar(x=labels, y=counts, name="clients", marker={"color": "#0891b2"}, meta=Series(("-",)).meta())
    layout = _layout(Chart("participation", "", "clients", ()), y_title="clients", right_axis=False, empty=False)
    layout["xaxis"] = {"title": {"text": f"times sampled (after round {last['round']})"}, "type": "category"}
    figure = _figure_json([bars], layout)
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
        "meta": {**trace.series.meta(), "run": (run := style.pop("run", "")), **({"legend": run} if run else {})},
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


def _layout(chart: Chart, *, y_title: str, right_axis: bool, empty: bool) -> dict:
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


def _figure_json(traces: list, layout: dict) -> dict:
    figure = json.loads(go.Figure(data=traces, layout=layout).to_json())
    figure["layout"].pop("template", None)  # plotly.js's own defaults, as the pages always had
    return figure


def dashboard_figure(chart: Chart, rounds: list[dict]) -> dict:
    """``{"data", "layout"}`` of one dashboard chart for a run's rounds (``RoundResult`` dicts)."""
    traces = [_trace(t, rounds) for t in chart.traces]
    layout = _layout(chart, y_title=chart.y_title, right_axis=bool(chart.y2_title), empty=not rounds)
    return _figure_json(traces, layout)


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
    layout = _layout(chart, y_title=y_title, right_axis=False, empty=empty)
    # Six runs' legend took 60% of each panel (and scrolled): the page's shared legend replaces it.
    layout["showlegend"] = False
    layout["margin"]["t"] = 12
    return _figure_json(traces, layout)


def _label(s: dict) -> str:
    return s.get("label") or f"{s['name']} #{s['id']}"


def compare_chart_list(series: list[dict]) -> list[Chart]:
    """The charts the compare page draws for ``series``: those with a compare trace that any run fills."""
    shown = _charts_for([r for s in series for r in s["rounds"]])
    return [c for c in shown if any(t.compare for t in c.traces)]


def x_axes(rounds: list[dict]) -> dict:
    """Per round, the x values of the other axes the reader can pick: the wall-clock seconds of the
    rounds so far (Σ round time) and the MB communicated so far (up + down)."""
    seconds = Series(("round_seconds",), cumulative=True).points(rounds)
    mb = Series(("bytes_up", "bytes_down"), scale=MB, cumulative=True).points(rounds)
    return {"round": seconds[0], "seconds": seconds[1], "mb": mb[1]}


def dashboard_charts(rounds: list[dict], spec: dict | None = None) -> dict:
    """What the dashboard and the report need to draw and extend their charts (the
    ``charts-data`` script): each chart's figure, and the progress the ETA is computed from.
    With the run's ``spec``, the per-client and privacy charts it will fill are there from round 0."""
    charts = _charts_for(rounds, spec)
    panels = [{"id": f"chart-{c.id}", "title": c.title, "memory": c.id == "memory"} for c in charts]
    figures = {f"chart-{c.id}": dashboard_figure(c, rounds) for c in charts}
    participation = participation_figure(rounds)
    if participation is not None:
        panels.append({"id": "chart-participation", "title": "Participation per client", "memory": False})
        figures["chart-participation"] = participation
    return {
        "panels": panels,
        "figures": figures,
        "last_round": rounds[-1]["round"] if rounds else 0,
        "rounds": len(rounds),
        "round_seconds": sum(r["round_seconds"] or 0.0 for r in rounds),
        "x_axes": {"": x_axes(rounds)},
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
        "panels": [{"id": f"cmp-{c.id}", "title": c.compare_title} for c in charts],
        "figures": {f"cmp-{c.id}": compare_figure(c, series) for c in charts},
        "x_axes": {str(s["id"]): x_axes(s["rounds"]) for s in series},
    }
