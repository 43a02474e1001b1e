"""The sweep pages: the list, the new-sweep form (also the clone of a sweep), the sweep's page
(progress, the table per configuration, mean ± std curves, parallel coordinates), and cancel and
delete as a unit. Every sweep is fetched through ``orchestrator.experiments.access``."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from fedweb.inputs import parse_int
from fedweb_engine.spec.presets import PRESETS
from orchestrator.experiments import access
from orchestrator.experiments.models import FINISHED
from orchestrator.experiments.records import RoundMetric
from orchestrator.experiments.summaries import summarize
from orchestrator.sweeps import overview
from orchestrator.sweeps.create import create_sweep
from orchestrator.sweeps.models import SEED_FIELD
from orchestrator.sweeps.stats import METRICS, band, group, in_statistics, value_at
from orchestrator.web.forms.experiment_forms import spec_initial
from orchestrator.web.forms.sweep_forms import SEARCH_FIELDS, SweepForm, axes_text, ranges_text
from orchestrator.web.sweep_charts import NO_TARGET_TEXT, band_figure, parallel_figure, rungs_figure, trials_figure

CURVES = (("test_accuracy", "Test accuracy", "accuracy"), ("test_loss", "Test loss", "loss"))


@login_required
def sweep_list(request: HttpRequest) -> HttpResponse:
    sweeps = access.sweeps_visible_to(request.user).select_related("owner")[:200]
    return render(request, "orchestrator/sweep_list.html", {"sweeps": sweeps})


@login_required
def sweep_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = SweepForm(request.POST, user=request.user)
        if form.is_valid():  # clean() checked the whole sweep, every run's spec included (sweeps.create.check)
            fields = {k: form.cleaned_data[k] for k in ("name", "description", "tags", "team", "visibility")}
            sweep = create_sweep(owner=request.user, **form.sweep_args, **fields)
            return redirect("sweep_detail", sweep.pk)
    else:
        form = SweepForm(initial=_new_initial(request), user=request.user)
    presets = [{"name": name, "title": p["title"]} for name, p in PRESETS.items()]
    own = ("name", "description", "tags", "team", "visibility", "axes", "seeds", "mode", "samples", "sample_seed")
    context = {"form": form, "presets": presets, "own_fields": own, "search_fields": SEARCH_FIELDS}
    return render(request, "orchestrator/sweep_new.html", context)


def _new_initial(request: HttpRequest) -> dict:
    preset, clone = request.GET.get("preset"), request.GET.get("clone", "")
    if (source_pk := parse_int(clone, minimum=1)) is not None:
        source = access.get_sweep_for_user(request.user, source_pk)
        seeds = source.axes.get(SEED_FIELD)
        return {
            **spec_initial(source.base_spec),
            "name": f"{source.name} (copy)", "description": source.description, "tags": ", ".join(source.tags),
            "axes": axes_text(source.axes),
            "seeds": ", ".join(map(json.dumps, seeds)) if seeds else "", "mode": source.mode,
            "samples": source.samples, "sample_seed": source.sample_seed, "stopping": source.stopping,
            "max_workers": source.max_workers, **_search_initial(source.search),
        }  # fmt: skip
    base = PRESETS[preset]["spec"] if preset in PRESETS else {}
    return {**spec_initial(base), "name": preset or "", "seeds": "0, 1, 2", "sample_seed": 0}


def _search_initial(search: dict) -> dict:
    """A cloned sweep's search settings as the form shows them."""
    initial = {k: search[k] for k in ("first_rung", "eta", "last_k", "target", "direction", "budget") if k in search}
    return {**initial, "ranges": ranges_text(search.get("ranges") or {})}


def sweep_context(sweep) -> dict:
    """What the sweep page shows: progress, one table row per configuration, curves and parcoords."""
    experiments = list(sweep.experiments.order_by("pk"))
    rounds: dict[int, list[dict]] = {e.pk: [] for e in experiments}
    for row in RoundMetric.objects.filter(experiment__sweep=sweep).order_by("experiment_id", "round"):
        rounds[row.experiment_id].append(row.to_result_dict())
    rows = group(experiments, rounds, sweep.config_fields)
    rows.sort(key=lambda r: -1.0 if r["final_accuracy"][0] is None else r["final_accuracy"][0], reverse=True)
    figures = {
        f"sweep-{field}": band_figure(title, y_title, [{"label": r["label"], **band(r["runs"], rounds, field)} for r in rows])
        for field, title, y_title in CURVES
    }  # fmt: skip
    # Completed runs only, as the table's statistics: a running run's latest accuracy is not its final one.
    runs = [{"values": {f: value_at(e.spec, f) for f in sweep.config_fields},
             "target": summarize(rounds[e.pk])["final_accuracy"]} for e in experiments if in_statistics(e)]  # fmt: skip
    parallel = parallel_figure(sweep.config_fields, runs) if sweep.config_fields else None
    if parallel is not None:
        figures["sweep-parallel"] = parallel
    chart_ids = [f"sweep-{field}" for field, _, _ in CURVES] + (["sweep-parallel"] if sweep.config_fields else [])
    summary = overview.summary(sweep)
    if summary is not None:
        figures.update(_search_figures(sweep, summary))
        chart_ids = [i for i in ("sweep-rungs", "sweep-trials") if i in figures] + chart_ids
    statuses: dict[str, int] = {}
    for e in experiments:
        statuses[e.status] = statuses.get(e.status, 0) + 1
    return {
        "sweep": sweep, "experiments": experiments, "rows": rows, "metrics": METRICS, "figures": figures,
        "statuses": sorted(statuses.items()), "finished": sum(1 for e in experiments if e.is_finished),
        "rounds_done": sum(e.current_round for e in experiments),
        "rounds_total": sum(e.total_rounds for e in experiments),
        "active": any(not e.is_finished for e in experiments),
        "ids": ",".join(str(e.pk) for e in experiments),
        "parallel_pending": NO_TARGET_TEXT if sweep.config_fields and parallel is None else "",
        "chart_ids": chart_ids, "search": summary,
        "live": {"socket": f"/ws/sweeps/{sweep.pk}/", "refresh": reverse("sweep_live", args=[sweep.pk])},
    }  # fmt: skip


def _search_figures(sweep, summary: dict) -> dict:
    """The rungs chart of an early-stopping search; the trials in order of a TPE one."""
    target, direction = sweep.search["target"], sweep.search["direction"]
    figures = {}
    if sweep.stopping != "none":
        figures["sweep-rungs"] = rungs_figure(summary["trials"], target, log_x=sweep.stopping == "asha")
    if sweep.mode == "tpe":
        figures["sweep-trials"] = trials_figure(summary["trials"], target, direction)
    return figures


@login_required
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = access.get_sweep_for_user(request.user, pk)
    ctx = sweep_context(sweep)
    ctx.update(can_control=access.can_control(sweep, request.user), can_delete=access.can_delete(sweep, request.user))
    return render(request, "orchestrator/sweep_detail.html", ctx)


@login_required
@require_POST
def sweep_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = access.get_sweep_for_user(request.user, pk, control=True)
    if request.POST.get("confirm") != "yes":  # it cannot be undone: ask first
        runs = sweep.experiments.exclude(status__in=FINISHED).count()
        context = {"target": sweep, "runs": runs, "action": reverse("sweep_cancel", args=[pk]),
                   "back": reverse("sweep_detail", args=[pk])}  # fmt: skip
        return render(request, "orchestrator/cancel_confirm.html", context)
    cancelled = sweep.cancel(by=request.user.username)
    messages.info(request, f"Cancelled {cancelled} run{'s' if cancelled != 1 else ''} of the sweep.")
    return redirect("sweep_detail", pk)


@login_required
@require_POST
def sweep_delete(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = access.get_sweep_for_user(request.user, pk, delete=True)
    if request.POST.get("confirm") != "yes":
        return render(request, "orchestrator/sweep_delete.html", {"sweep": sweep})
    sweep.cancel(by=request.user.username)  # a round in flight then stops at its boundary
    name = sweep.name
    sweep.delete()  # its runs go with it (and their checkpoint files, via Experiment's post_delete)
    messages.success(request, f"Deleted the sweep “{name}” and its runs.")
    return redirect("sweep_list")
