"""The pages of FedWeb: experiments list, new-experiment form and the live dashboard.

Every experiment is fetched through ``orchestrator.experiments.access``. Pages render what the database holds;
``static/js/<page>.js`` adds the live part.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from fedweb.inputs import parse_int
from fedweb_engine.spec.presets import PRESETS
from orchestrator.experiments import access
from orchestrator.experiments.access import experiments_visible_to, get_experiment_for_token, get_experiment_for_user
from orchestrator.experiments.leak import leak_warnings
from orchestrator.experiments.models import ACTIVE, Experiment, Kind, Status
from orchestrator.experiments.public import host_names, redact, redact_events
from orchestrator.experiments.round_table import rounds_of, table_columns, table_rows
from orchestrator.experiments.summaries import cells, summarize
from orchestrator.experiments.summaries import definitions as summary_definitions
from orchestrator.external.liveness import mark_crashed
from orchestrator.fleet.queues import live_workers_by_queue, queue_depths, submit_warnings, waiting_for, waiting_status
from orchestrator.storage import disk_use as disk
from orchestrator.web.charts import dashboard_charts
from orchestrator.web.external_dashboard import config_groups, custom_charts
from orchestrator.web.forms.experiment_forms import ExperimentForm, spec_initial
from orchestrator.web.forms.runs_forms import WordsForm
from orchestrator.web.notes import render_notes
from orchestrator.web.spec_table import spec_groups

LIST_LIMIT = 500
EDITS_SHOWN = 50


# -- the runs table's live statuses (the table itself: orchestrator/web/views/runs.py) ----------------


@login_required
def experiment_statuses(request: HttpRequest) -> JsonResponse:
    ids = ids_param(request.GET.get("ids", ""))
    fields = ("pk", "status", "current_round", "total_rounds", "worker", "started", "finished")
    rows = list(experiments_visible_to(request.user).filter(pk__in=ids).values(*fields, "queue", "spec", "plugins"))
    active = any(r["status"] in ACTIVE for r in rows)  # else nothing waits: spare the queries
    served, depths = (live_workers_by_queue(), queue_depths()) if active else ({}, {})
    for row in rows:
        row["waiting"] = waiting_status(
            row["status"], row["queue"], row["spec"], served, depths, row["plugins"], experiment_id=row["pk"]
        )
        del row["queue"], row["spec"], row["plugins"]
    return JsonResponse({"experiments": {str(r.pop("pk")): r for r in rows}})


def ids_param(raw: str) -> list[int]:
    """The experiment ids of a ``?ids=1,2,3`` parameter (bad parts are left out), at most LIST_LIMIT."""
    ids = (parse_int(part, minimum=1) for part in raw.replace(" ", "").split(","))
    return [pk for pk in ids if pk is not None][:LIST_LIMIT]


# -- new experiment ------------------------------------------------------------------------------


@login_required
def experiment_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = ExperimentForm(request.POST, user=request.user)
        # Stored and queued by create_experiment, which checks the spec; None: refused, and why is on the form.
        if form.is_valid() and (experiment := form.save()) is not None:
            for warning in submit_warnings(experiment):
                messages.warning(request, warning)
            return redirect("experiment_detail", experiment.pk)
    else:
        form = ExperimentForm(initial=_new_initial(request), user=request.user)
    presets = [{"name": name, **{k: p[k] for k in ("title", "description")}} for name, p in PRESETS.items()]
    ctx = {"form": form, "presets": presets, "preset": request.GET.get("preset", "")}
    return render(request, "orchestrator/experiment_new.html", ctx)


def _new_initial(request: HttpRequest) -> dict:
    preset, clone = request.GET.get("preset"), request.GET.get("clone", "")
    if preset in PRESETS:
        p = PRESETS[preset]
        return {**spec_initial(p["spec"]), "name": preset, "description": p["description"]}
    if (source_pk := parse_int(clone, minimum=1)) is not None:
        source = get_experiment_for_user(request.user, source_pk)
        extra = {"name": f"{source.name} (copy)", "description": source.description, "tags": ", ".join(source.tags)}
        return {**spec_initial(source.spec), **extra}
    return spec_initial({})


# -- the dashboard ---------------------------------------------------------------------------------


def dashboard_context(experiment: Experiment, *, can_control: bool, ws_url: str, user=None, token: str = "") -> dict:
    external = experiment.kind == Kind.EXTERNAL
    if external and experiment.status == Status.RUNNING and mark_crashed():
        experiment.refresh_from_db()
    rounds = rounds_of(experiment, public=bool(token))
    events = list(experiment.log_entries.order_by("-time", "-id")[:200])[::-1]
    hosts = host_names(experiment) if token else []
    summary = summarize(rounds)
    return {
        "experiment": experiment,
        "waiting": waiting_for(experiment),
        "error": redact(experiment.error, hosts),
        "charts": dashboard_charts(rounds, None if external else experiment.spec),
        "custom_charts": custom_charts(experiment) if external else {},
        "last_rounds": table_rows(rounds[-200:], experiment.spec),
        "table_columns": table_columns(rounds, experiment.spec),
        "events": redact_events(events, hosts) if token else events,
        "spec_json": json.dumps(experiment.spec, indent=2),
        "spec_groups": config_groups(experiment.spec) if external else spec_groups(experiment.spec),
        "summary": cells(summary),
        "can_control": can_control,
        "can_delete": bool(user and access.can_delete(experiment, user)),
        "token_query": f"?token={token}" if token else "",
        "ws_url": ws_url,
        "leak_warnings": leak_warnings(rounds),
        "notes_html": render_notes(experiment.notes),
        # Who edited its words: for those who may read it by right, not through a public link.
        "edits": [] if token else list(experiment.edits.all()[:EDITS_SHOWN]),
        "words_form": WordsForm(
            initial={
                **{k: getattr(experiment, k) for k in ("name", "description", "notes")},
                "tags": ", ".join(experiment.tags),
            }
        )
        if can_control
        else None,  # fmt: skip
        "disk": None if external else disk.usage(experiment.pk),
        "device": rounds[-1]["device"] if rounds else "",
        "page": {
            "id": experiment.pk,
            "status": experiment.status,
            "current_round": experiment.current_round,
            "total_rounds": experiment.total_rounds,
            "started": experiment.started.isoformat() if experiment.started else None,
            "finished": experiment.finished.isoformat() if experiment.finished else None,
            "ws_url": ws_url,
            "table_columns": table_columns(rounds, experiment.spec),
            "summary": {"metrics": summary_definitions(), "values": summary},
        },
    }


@login_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, pk)
    ctx = dashboard_context(
        experiment,
        can_control=access.can_control(experiment, request.user),
        ws_url=f"/ws/experiments/{pk}/",
        user=request.user,
    )
    return render(request, "orchestrator/experiment_detail.html", ctx)


def experiment_shared(request: HttpRequest, token: str) -> HttpResponse:
    experiment = get_experiment_for_token(token)
    ws_url = f"/ws/experiments/{experiment.pk}/?token={token}"
    ctx = dashboard_context(experiment, can_control=False, ws_url=ws_url, token=token)
    ctx["shared"] = True
    return render(request, "orchestrator/experiment_detail.html", ctx)
