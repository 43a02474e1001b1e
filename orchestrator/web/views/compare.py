"""The compare page: the chosen experiments' curves on shared axes, and where their specs differ.

The runs are ``?ids=1,2,3``, or the first ``COMPARE_LIMIT`` runs of a runs-table query (``?q=...``,
sorted as the table is). ``&group=1`` pools runs that differ only by seed; ``&group=a,b`` groups by
those columns, as the runs table does, and the charts follow (mean ± std bands per group). Beside
the legend, each run's "to target" figures for ``&target=`` (default 0.8): the first round at or
above that test accuracy, and the seconds, MB and ε spent by then.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from orchestrator.experiments.access import get_experiment_for_user
from orchestrator.experiments.round_table import rounds_of
from orchestrator.experiments.specs import flatten, shown_spec
from orchestrator.experiments.summaries import METRICS, cells, summarize
from orchestrator.runs import table
from orchestrator.runs.run_summary import at_target, fold_all
from orchestrator.sweeps.stats import METRICS as GROUP_METRICS
from orchestrator.sweeps.stats import differing_fields, group, run_labels
from orchestrator.web.charts import compare_chart_list, compare_charts
from orchestrator.web.forms.runs_forms import RunsTableForm
from orchestrator.web.sweep_charts import grouped_charts
from orchestrator.web.views.pages import ids_param

COMPARE_LIMIT = 24  # runs of a query on one page: beyond, the charts are unreadable and slow


def spec_differences(specs: list[dict]) -> list[tuple[str, list]]:
    """(dotted field, [value per spec]) for every field whose values are not all equal."""
    flat = [flatten(s) for s in specs]
    keys = sorted({k for f in flat for k in f})
    rows = [(k, [f.get(k) for f in flat]) for k in keys]
    return [(k, values) for k, values in rows if len({json.dumps(v, sort_keys=True) for v in values}) > 1]


def to_target_text(rounds: list[dict], target: float) -> str:
    """A run's cost to reach ``target``: "round 12 · 6.0 s · 0.19 MB", or "– (best 0.7412)"."""
    summary, steps = fold_all(rounds)
    step = at_target(steps, target)
    if step is None:
        best = summary["best_accuracy"]
        return "–" + (f" (best {best:.4f})" if best is not None else "")
    parts = [f"round {step['round']}", f"{step['seconds']:.1f} s" if step["seconds"] is not None else ""]
    parts.append(f"{step['bytes'] / 1e6:.3g} MB" if step["bytes"] is not None else "")
    parts.append(f"ε {step['epsilon']:.3f}" if step["epsilon"] is not None else "")
    return " · ".join(p for p in parts if p)


@login_required
def experiment_compare(request: HttpRequest) -> HttpResponse:
    data = request.GET.copy()
    if data.get("group") == "1":  # "the fields that differ", not a column
        data.pop("group")
    form = RunsTableForm(data, user=request.user)
    valid = form.is_valid()
    target = form.cleaned_data["target"] if valid else 0.8
    if request.GET.get("ids") or not (valid and request.GET.get("q")):
        ids = list(dict.fromkeys(ids_param(request.GET.get("ids", ""))))
        experiments = [get_experiment_for_user(request.user, pk) for pk in ids]
    else:  # the first runs of a runs-table query: only those the reader may see
        spec = form.table_spec()
        experiments = table.load(request.user, table.page_ids(table.matching(request.user, spec), spec, 0, COMPARE_LIMIT), spec)  # fmt: skip
    labels = run_labels(experiments)
    series = [
        {"id": e.pk, "name": e.name, "label": label, "rounds": rounds_of(e)}
        for e, label in zip(experiments, labels, strict=True)
    ]
    specs = [shown_spec(e) for e in experiments]
    ctx = {"experiments": experiments, "series": series, "differences": spec_differences(specs)}
    ctx["charts"] = compare_charts(series)
    for item, s in zip(ctx["charts"]["legend"], series, strict=True):
        item["target"] = to_target_text(s["rounds"], target)
    ctx.update(metrics=METRICS, target=target, query=request.GET.get("q", ""))
    ctx["rows"] = [(e, cells(summarize(s["rounds"]))) for e, s in zip(experiments, series, strict=True)]
    if request.GET.get("group"):
        _group(request, form if valid else None, experiments, series, ctx)
    return render(request, "orchestrator/experiment_compare.html", ctx)


def _group(request: HttpRequest, form, experiments: list, series: list[dict], ctx: dict) -> None:
    """Runs pooled into groups: by the runs table's group columns, or (``group=1``) by every spec field
    that differs but the seed; a table of mean ± std, and the charts as bands, one per group."""
    columns = form.cleaned_data["group"] if form is not None else []
    if columns:
        fields = [c.name for c in columns]
        by_name = {c.name: c for c in columns}
        ctx["groups"] = group(experiments, _rounds(series), fields, lambda e, f: table.value(e, by_name[f]))
    else:
        fields = differing_fields([e.spec for e in experiments])
        ctx["groups"] = group(experiments, _rounds(series), fields)
    ctx.update(group_fields=fields, group_metrics=GROUP_METRICS)
    grouped = grouped_charts(compare_chart_list(series), ctx["groups"], _rounds(series))
    for key in ("legend", "panels"):
        ctx["charts"][key] = ctx["charts"][key] + grouped[key]
    ctx["charts"]["figures"].update(grouped["figures"])


def _rounds(series: list[dict]) -> dict[int, list[dict]]:
    return {s["id"]: s["rounds"] for s in series}
