"""The pages of FedWeb: experiments list, new-experiment form, the live dashboard, compare, workers.

Every experiment is fetched through ``orchestrator.access``; controls are POST-only and need the
right to control. Pages render what the database holds; ``static/js/<page>.js`` adds the live part.
"""

from __future__ import annotations

import csv
import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from fedweb.inputs import parse_int
from orchestrator.access import (
    experiments_visible_to,
    get_experiment_for_request,
    get_experiment_for_token,
    get_experiment_for_user,
    login_or_share_token_required,
    scoped,
    visible_ids,
)
from orchestrator.charts import compare_charts, dashboard_charts
from orchestrator.forms import ExperimentForm, spec_initial
from orchestrator.leak import leak_warnings
from orchestrator.models import ACTIVE, Experiment, Status, Worker
from orchestrator.previews import bandwidth_estimate, partition_preview
from orchestrator.public import host_names, redact, redact_events
from orchestrator.queues import live_workers_by_queue, queue_depths, queue_states, submit_warnings, waiting_status
from workers.engine.presets import PRESETS
from workers.engine.result import ROUND_RESULT_FIELDS
from workers.engine.spec import SpecError

SCOPES = ("all", "mine", "team", "shared")
LIST_LIMIT = 500


def healthz(request: HttpRequest) -> JsonResponse:
    """Database, Redis, the broker (when it is not that Redis) and live workers.
    200 when all answer, else 503."""
    from django.conf import settings

    checks = {"database": _check_database(), "redis": _check_redis()}
    if not settings.CELERY_BROKER_URL.startswith(("redis", "unix")):
        checks["broker"] = _check_broker()
    live = list(Worker.live().values("hostname", "queue", "last_heartbeat")) if checks["database"] == "ok" else []
    ok = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if ok else "error", **checks, "workers": len(live), "live_workers": live}
    return JsonResponse(body, status=200 if ok else 503)


def _check_database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return "ok"
    except Exception as e:
        return f"error: {e}"


def _check_redis() -> str:
    import redis
    from django.conf import settings

    try:
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        return "ok"
    except Exception as e:
        return f"error: {e}"


def _check_broker() -> str:
    from fedweb.celery import app

    try:
        with app.connection_for_read() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return "ok"
    except Exception as e:
        return f"error: {e}"


# -- experiments list ------------------------------------------------------------------------------


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    scope = request.GET.get("scope", "all")
    scope = scope if scope in SCOPES else "all"
    status = request.GET.get("status", "")
    tag = request.GET.get("tag", "").strip()
    q = request.GET.get("q", "").strip()
    visible = experiments_visible_to(request.user)
    qs = scoped(visible, request.user, scope if scope != "all" else None).select_related("owner")
    if status in Status.values:
        qs = qs.filter(status=status)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(description__icontains=q))
    experiments = list(qs[:LIST_LIMIT])
    if tag:  # JSON list membership isn't portable to SQLite; the list is bounded anyway
        experiments = [e for e in experiments if tag in (e.tags or [])]
    tags = sorted({t for tags in visible.values_list("tags", flat=True)[:LIST_LIMIT] for t in (tags or [])})
    ctx = {"experiments": experiments, "scope": scope, "scopes": SCOPES, "status": status, "statuses": Status.values}
    ctx.update({"tag": tag, "tags": tags, "q": q})
    return render(request, "orchestrator/experiment_list.html", ctx)


@login_required
def experiment_statuses(request: HttpRequest) -> JsonResponse:
    ids = _ids(request.GET.get("ids", ""))
    fields = ("pk", "status", "current_round", "total_rounds", "worker", "started", "finished")
    rows = list(experiments_visible_to(request.user).filter(pk__in=ids).values(*fields, "queue", "spec"))
    active = any(r["status"] in ACTIVE for r in rows)  # else nothing waits: spare the queries
    served, depths = (live_workers_by_queue(), queue_depths()) if active else ({}, {})
    for row in rows:
        row["waiting"] = waiting_status(row["status"], row["queue"], row["spec"], served, depths)
        del row["queue"], row["spec"]
    return JsonResponse({"experiments": {str(r.pop("pk")): r for r in rows}})


def _ids(raw: str) -> list[int]:
    ids = (parse_int(part, minimum=1) for part in raw.replace(" ", "").split(","))
    return [pk for pk in ids if pk is not None][:LIST_LIMIT]


# -- new experiment ------------------------------------------------------------------------------


@login_required
def experiment_new(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = ExperimentForm(request.POST, user=request.user)
        if form.is_valid():
            experiment = Experiment.objects.create(
                owner=request.user,
                team=form.cleaned_data["team"],
                visibility=form.cleaned_data["visibility"],
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                tags=form.cleaned_data["tags"],
                spec=form.spec.to_dict(),
            )
            experiment.start(by=request.user.username)
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


def _preview(request: HttpRequest, compute) -> JsonResponse:
    form = ExperimentForm(request.GET, preview=True, user=request.user)
    if not form.is_valid():
        return JsonResponse({"errors": form.spec_errors()}, status=400)
    try:
        return JsonResponse(compute(form.spec))
    except SpecError as e:
        return JsonResponse({"errors": {e.field: [str(e)]}}, status=400)


@login_required
def experiment_preview_bandwidth(request: HttpRequest) -> JsonResponse:
    return _preview(request, bandwidth_estimate)


@login_required
def experiment_preview_partition(request: HttpRequest) -> JsonResponse:
    return _preview(request, partition_preview)


# -- the dashboard ---------------------------------------------------------------------------------


def rounds_of(experiment: Experiment) -> list[dict]:
    return [row.to_result_dict() for row in experiment.rounds.order_by("round")]


def table_rows(rounds: list[dict]) -> list[dict]:
    """Rounds for the rounds table, newest first, with the byte counts in MB."""
    return [{**r, "up_mb": r["bytes_up"] / 1e6, "down_mb": r["bytes_down"] / 1e6} for r in reversed(rounds)]


def dashboard_context(experiment: Experiment, *, can_control: bool, ws_url: str, user=None, token: str = "") -> dict:
    rounds = rounds_of(experiment)
    events = list(experiment.events.order_by("-time", "-id")[:200])[::-1]
    hosts = host_names(experiment) if token else []
    return {
        "experiment": experiment,
        "waiting": waiting_status(experiment.status, experiment.queue, experiment.spec),
        "error": redact(experiment.error, hosts),
        "charts": dashboard_charts(rounds),
        "last_rounds": table_rows(rounds[-200:]),
        "events": redact_events(events, hosts) if token else events,
        "spec_json": json.dumps(experiment.spec, indent=2),
        "can_control": can_control,
        "can_delete": bool(user and experiment.can_delete(user)),
        "token_query": f"?token={token}" if token else "",
        "ws_url": ws_url,
        "leak_warnings": leak_warnings(rounds),
        "device": rounds[-1]["device"] if rounds else "",
        "page": {
            "id": experiment.pk,
            "status": experiment.status,
            "current_round": experiment.current_round,
            "total_rounds": experiment.total_rounds,
            "started": experiment.started.isoformat() if experiment.started else None,
            "finished": experiment.finished.isoformat() if experiment.finished else None,
            "ws_url": ws_url,
        },
    }


@login_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, pk)
    ctx = dashboard_context(
        experiment,
        can_control=experiment.can_control(request.user),
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


@login_or_share_token_required
def experiment_rounds_csv(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_request(request, pk)
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="experiment-{pk}-rounds.csv"'
    writer = csv.DictWriter(response, fieldnames=list(ROUND_RESULT_FIELDS))
    writer.writeheader()
    writer.writerows(rounds_of(experiment))
    return response


@login_or_share_token_required
def experiment_rounds_json(request: HttpRequest, pk: int) -> JsonResponse:
    experiment = get_experiment_for_request(request, pk)
    body = {"id": pk, "name": experiment.name, "status": experiment.status, "spec": experiment.spec}
    response = JsonResponse({**body, "rounds": rounds_of(experiment)}, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="experiment-{pk}-rounds.json"'
    return response


@login_or_share_token_required
def experiment_report(request: HttpRequest, pk: int) -> HttpResponse:
    from orchestrator.report import render_report

    experiment = get_experiment_for_request(request, pk)
    # Through the public link, the report names no worker host (as the share page doesn't).
    public = bool(request.GET.get("token"))
    response = HttpResponse(render_report(experiment, public=public), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="fedweb-experiment-{pk}-report.html"'
    return response


# -- controls (POST only, control rights) ----------------------------------------------------------


def _control(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, pk, control=True)
    if not getattr(experiment, action)(by=request.user.username):
        messages.warning(request, f"Could not {action} an experiment that is {experiment.status}.")
    return redirect("experiment_detail", pk)


@login_required
@require_POST
def experiment_pause(request: HttpRequest, pk: int) -> HttpResponse:
    return _control(request, pk, "pause")


@login_required
@require_POST
def experiment_resume(request: HttpRequest, pk: int) -> HttpResponse:
    return _control(request, pk, "resume")


@login_required
@require_POST
def experiment_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    return _control(request, pk, "cancel")


@login_required
@require_POST
def experiment_delete(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, pk, delete=True)
    if request.POST.get("confirm") != "yes":
        return render(request, "orchestrator/experiment_delete.html", {"experiment": experiment})
    experiment.cancel(by=request.user.username)  # a round in flight then stops at its boundary
    name = experiment.name
    experiment.delete()
    messages.success(request, f"Deleted “{name}”.")
    return redirect("experiment_list")


# -- compare -------------------------------------------------------------------------------------


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in d.items():
        if isinstance(value, dict):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def spec_differences(specs: list[dict]) -> list[tuple[str, list]]:
    """(dotted field, [value per spec]) for every field whose values are not all equal."""
    flat = [flatten(s) for s in specs]
    keys = sorted({k for f in flat for k in f})
    rows = [(k, [f.get(k) for f in flat]) for k in keys]
    return [(k, values) for k, values in rows if len({json.dumps(v, sort_keys=True) for v in values}) > 1]


@login_required
def experiment_compare(request: HttpRequest) -> HttpResponse:
    ids = list(dict.fromkeys(_ids(request.GET.get("ids", ""))))
    experiments = [get_experiment_for_user(request.user, pk) for pk in ids]
    series = [{"id": e.pk, "name": e.name, "rounds": rounds_of(e)} for e in experiments]
    ctx = {"experiments": experiments, "series": series, "differences": spec_differences([e.spec for e in experiments])}
    ctx["charts"] = compare_charts(series)
    return render(request, "orchestrator/experiment_compare.html", ctx)


# -- workers ---------------------------------------------------------------------------------------


def _workers_for(user) -> list[dict]:
    workers = list(Worker.objects.select_related("current_experiment"))
    visible = visible_ids(user, [w.current_experiment_id for w in workers])  # the workers socket's rule too
    rows = []
    for w in workers:
        current = w.current_experiment if w.current_experiment_id in visible else None
        rows.append(
            {
                "hostname": w.hostname,
                "queue": w.queue,
                "devices": w.devices,
                "last_heartbeat": w.last_heartbeat.isoformat(),
                "seconds_ago": max(0, int((timezone.now() - w.last_heartbeat).total_seconds())),
                "lost": w.is_lost,
                "current_experiment": {"id": current.pk, "name": current.name} if current else None,
                "busy": w.current_experiment_id is not None,
            }
        )
    return rows


@login_required
def worker_list(request: HttpRequest) -> HttpResponse:
    ctx = {"workers": _workers_for(request.user), "queues": queue_states(broker=True)}
    return render(request, "orchestrator/worker_list.html", ctx)


@login_required
def worker_list_json(request: HttpRequest) -> JsonResponse:
    queues = [q.to_dict() for q in queue_states(broker=True)]
    return JsonResponse({"workers": _workers_for(request.user), "queues": queues})
