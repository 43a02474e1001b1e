"""The compare page: the chosen experiments' curves on shared axes, and where their specs differ."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from orchestrator.experiments.access import get_experiment_for_user
from orchestrator.experiments.rounds import rounds_of
from orchestrator.experiments.specs import flatten, shown_spec
from orchestrator.experiments.summaries import METRICS, cells, summarize
from orchestrator.sweeps.charts import grouped_charts
from orchestrator.sweeps.stats import METRICS as GROUP_METRICS
from orchestrator.sweeps.stats import differing_fields, group, run_labels
from orchestrator.web.charts import compare_chart_list, compare_charts
from orchestrator.web.views.pages import ids_param


def spec_differences(specs: list[dict]) -> list[tuple[str, list]]:
    """(dotted field, [value per spec]) for every field whose values are not all equal."""
    flat = [flatten(s) for s in specs]
    keys = sorted({k for f in flat for k in f})
    rows = [(k, [f.get(k) for f in flat]) for k in keys]
    return [(k, values) for k, values in rows if len({json.dumps(v, sort_keys=True) for v in values}) > 1]


@login_required
def experiment_compare(request: HttpRequest) -> HttpResponse:
    ids = list(dict.fromkeys(ids_param(request.GET.get("ids", ""))))
    experiments = [get_experiment_for_user(request.user, pk) for pk in ids]
    labels = run_labels(experiments)
    series = [
        {"id": e.pk, "name": e.name, "label": label, "rounds": rounds_of(e)}
        for e, label in zip(experiments, labels, strict=True)
    ]
    specs = [shown_spec(e) for e in experiments]
    ctx = {"experiments": experiments, "series": series, "differences": spec_differences(specs)}
    ctx["charts"] = compare_charts(series)
    ctx["metrics"] = METRICS
    ctx["rows"] = [(e, cells(summarize(s["rounds"]))) for e, s in zip(experiments, series, strict=True)]
    if request.GET.get("group"):  # runs that differ only by seed pool into one row: mean ± std
        fields = differing_fields(specs)
        ctx.update(group_fields=fields, group_metrics=GROUP_METRICS)
        rounds_by_id = {s["id"]: s["rounds"] for s in series}
        ctx["groups"] = group(experiments, rounds_by_id, fields)
        # The charts too, not only the table: each configuration's mean ± std band (as on a sweep's page).
        grouped = grouped_charts(compare_chart_list(series), ctx["groups"], rounds_by_id)
        for key in ("legend", "panels"):
            ctx["charts"][key] = ctx["charts"][key] + grouped[key]
        ctx["charts"]["figures"].update(grouped["figures"])
    return render(request, "orchestrator/experiment_compare.html", ctx)
