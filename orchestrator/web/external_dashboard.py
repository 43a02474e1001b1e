"""How an external run's dashboard differs: its config as the spec table, and its "custom metrics"
section: one chart per group of user-named scalars, the group
being the name's prefix before '/' ("grad/norm" and "grad/max" share the chart "grad/…"; a name
without '/', or alone in its group, has its own chart under its full name). Every trace keeps its
full name in the legend, so "grad/norm" is never shown as "grad". ``static/js/custom_metrics.js``
draws them and extends them live from the round events' ``custom`` field."""

from __future__ import annotations

import re

from orchestrator.experiments.specs import flatten
from orchestrator.external.models import CustomMetric

MAX_CHARTS = 50  # the run's names are bounded (FEDWEB_EXTERNAL_MAX_METRICS); so is the page


def group_of(name: str) -> str:
    return name.split("/", 1)[0] if "/" in name else name


def custom_charts(experiment) -> dict:
    """``{"panels": [{"id", "title", "names"}], "figures": {id: {"data", "layout"}}}`` (Plotly JSON)."""
    rows = list(CustomMetric.objects.filter(experiment=experiment).order_by("round").values_list("round", "values"))
    series: dict[str, tuple[list, list]] = {}
    for number, values in rows:
        for name, value in values.items():
            xs, ys = series.setdefault(name, ([], []))
            xs.append(number)
            ys.append(value)
    groups: dict[str, list[str]] = {}
    for name in sorted(series):
        groups.setdefault(group_of(name), []).append(name)
    panels, figures = [], {}
    for group, names in list(groups.items())[:MAX_CHARTS]:
        chart_id = "custom-" + re.sub(r"[^A-Za-z0-9_-]", "_", group)
        title = names[0] if len(names) == 1 else f"{group}/…"
        panels.append({"id": chart_id, "title": title, "names": names})
        data = [{"type": "scatter", "mode": "lines", "name": n, "x": series[n][0], "y": series[n][1]} for n in names]
        layout = {
            "margin": {"l": 50, "r": 10, "t": 30, "b": 40},
            "height": 260,
            "xaxis": {"title": {"text": "round"}},
            # Always: a lone trace's legend still says which metric it is.
            "showlegend": True,
            "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        }
        figures[chart_id] = {"data": data, "layout": layout}
    return {"panels": panels, "figures": figures}


def config_groups(config: dict) -> list[dict]:
    """The free-form config as ``spec_groups`` rows (one group per top-level object, the rest in
    "config"), so the spec table template shows it unchanged; nothing is marked changed."""
    groups: dict[str, list[dict]] = {}
    for key, value in flatten(config if isinstance(config, dict) else {}).items():
        section = key.split(".", 1)[0] if "." in key else "config"
        shown = value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
        groups.setdefault(section, []).append({"field": key, "value": shown, "help": "", "changed": False})
    return [{"name": name, "rows": rows} for name, rows in groups.items()]
