"""The MLflow tracking REST API, the subset scripts use, under ``/api/2.0/mlflow/``.

``MLFLOW_TRACKING_URI=http://fedweb:8000`` and ``MLFLOW_TRACKING_TOKEN=<API token>`` make ``mlflow``'s
``set_experiment`` / ``start_run`` / ``log_param`` / ``log_metric(s)`` / ``end_run`` write a FedWeb
external run, with no new code:

- an MLflow experiment is a named folder of the caller's runs (``MlflowExperiment``); id ``0`` is the
  caller's "Default";
- a run is an external run (its id is the FedWeb id); params are its config (the spec table), tags
  are kept beside it, ``mlflow.runName`` / ``run_name`` is its name;
- a metric logged with ``step=r`` (r >= 1) is a value of round r: the standard names (``loss``,
  ``accuracy``, ``test_loss``, ``bytes_up``, ...: ``ingest.STANDARD``/``ALIASES``) fill the round's
  columns, any other name is a custom metric. Since MLflow sends a round's metrics one call at a
  time, round r is recorded (once, through ``ingest.record``, with the live event) when a later step
  arrives or the run ends; until then it is ``pending`` and the MLflow reads already show it;
- a metric with step 0 (MLflow's default) is a run-level value with no round.

Answers have MLflow's JSON shapes, errors too: ``{"error_code": "...", "message": "..."}`` with the
HTTP status MLflow uses for that code. Artifacts, the model registry, logged models, traces, search
and deletes are not served: ``ENDPOINT_NOT_FOUND`` (404) with a message saying so, like any other
unknown path; never a 5xx.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from orchestrator.api.external.ingestion import MAX_CONFIG_CHARS

# MLflow's error codes and the HTTP status its server answers for each.
from orchestrator.api.external.mlflow_protocol import (
    COLUMN,
    RUN_STATUS,
    UNSUPPORTED,
    MlflowError,
    _error,
    _experiment_json,
    _field,
    _metric_items,
    _mlflow_experiment,
    _ms,
    _no_run_token,
    _param_pairs,
    _tags,
    _value,
    mlflow_view,
)
from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external import ingest
from orchestrator.external.models import CustomMetric, ExternalRun, MlflowExperiment, MlflowRun


@mlflow_view(["GET"])
def experiment_by_name(request: Request, body: dict) -> dict:
    _no_run_token(request, "read experiments")
    name = _field(body, "experiment_name")
    found = MlflowExperiment.objects.filter(owner=request.user, name=name).first()
    if found is None and name == "Default":
        found = _mlflow_experiment(request, "0")
    if found is None:
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Could not find experiment with name '{name[:200]}'")
    return {"experiment": _experiment_json(found)}


@mlflow_view(["GET"])
def experiment_get(request: Request, body: dict) -> dict:
    _no_run_token(request, "read experiments")
    return {"experiment": _experiment_json(_mlflow_experiment(request, _field(body, "experiment_id")))}


@mlflow_view(["POST"])
def experiment_create(request: Request, body: dict) -> dict:
    _no_run_token(request, "create experiments")
    name = _field(body, "name")
    if len(name) > 500:
        raise MlflowError("INVALID_PARAMETER_VALUE", "'name' is at most 500 characters")
    tags = _tags(body.get("tags"))
    try:
        with transaction.atomic():
            created = MlflowExperiment.objects.create(owner=request.user, name=name, tags=tags)
    except IntegrityError:
        raise MlflowError("RESOURCE_ALREADY_EXISTS", f"Experiment '{name[:200]}' already exists.") from None
    return {"experiment_id": str(created.pk)}


# --- runs ---------------------------------------------------------------------------------------


@mlflow_view(["POST"])
def run_create(request: Request, body: dict) -> dict:
    """A new external run in the given MLflow experiment (status running)."""
    _no_run_token(request, "create runs")
    folder = _mlflow_experiment(request, _field(body, "experiment_id", required=False, default="0"))
    tags = _tags(body.get("tags"))
    name = _field(body, "run_name", required=False) or tags.get("mlflow.runName") or f"mlflow run in {folder.name}"
    now = timezone.now()
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=request.user, kind=Kind.EXTERNAL, name=name[:200], spec={}, status=Status.RUNNING,
            queue="inline", started=now, tags=["mlflow", folder.name[:50]],
        )  # fmt: skip
        ExternalRun.issue(experiment)  # a write credential nobody sees: the caller's API token writes it
        run = MlflowRun.objects.create(
            experiment=experiment, mlflow_experiment=folder, tags={**tags, "mlflow.runName": name}
        )
    experiment.log("info", f"External run created through the MLflow API by {request.user.username}")
    return {"run": _run_json(experiment, run)}


def _run_for(request: Request, run_id, *, write: bool) -> tuple[Experiment, MlflowRun]:
    if run_id is None or not str(run_id).isdigit():
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run '{str(run_id)[:50]}' not found")
    pk = int(run_id)
    if isinstance(request.auth, ExternalRun):
        if request.auth.experiment_id != pk:
            raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run '{pk}' not found")
        experiment = request.auth.experiment
    else:
        try:
            experiment = access.get_experiment_for_user(request.user, pk, control=write)
        except Http404:
            raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"Run '{pk}' not found") from None
        except Exception as e:  # PermissionDenied from access
            raise MlflowError("PERMISSION_DENIED", str(e)) from None
    if experiment.kind != Kind.EXTERNAL:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", f"Run '{pk}' is run by FedWeb's workers: only external runs take MLflow writes"
        )
    run, _ = MlflowRun.objects.get_or_create(experiment=experiment)
    return experiment, run


def _run_id(body: dict):
    return body.get("run_id") or body.get("run_uuid")


def _run_json(experiment: Experiment, run: MlflowRun) -> dict:
    folder = run.mlflow_experiment_id or 0
    latest = {}
    for key, (value, ts, step) in _history_all(experiment, run).items():
        if value:
            latest[key] = {"key": key, "value": value[-1], "timestamp": ts[-1], "step": step[-1]}
    info = {
        "run_id": str(experiment.pk),
        "run_uuid": str(experiment.pk),
        "run_name": experiment.name,
        "experiment_id": str(folder),
        "user_id": experiment.owner.username,
        "status": RUN_STATUS.get(experiment.status, "RUNNING"),
        "start_time": _ms(experiment.started or experiment.created),
        "artifact_uri": f"mlflow-artifacts:/{folder}/{experiment.pk}/artifacts",
        "lifecycle_stage": "active",
    }
    if experiment.finished:
        info["end_time"] = _ms(experiment.finished)
    params = [{"key": k, "value": str(v)} for k, v in (experiment.spec or {}).items()]
    tags = [{"key": k, "value": v} for k, v in run.tags.items()]
    return {"info": info, "data": {"metrics": list(latest.values()), "params": params, "tags": tags}, "inputs": {}}


@mlflow_view(["GET"])
def run_get(request: Request, body: dict) -> dict:
    experiment, run = _run_for(request, _run_id(body), write=False)
    return {"run": _run_json(experiment, run)}


@mlflow_view(["POST"])
def run_update(request: Request, body: dict) -> dict:
    """``status`` FINISHED / FAILED / KILLED ends the run (its pending round is recorded first)."""
    pk = _run_id(body)
    status = _field(body, "status", required=False)
    name = _field(body, "run_name", required=False)
    if status not in (None, "RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED"):
        raise MlflowError("INVALID_PARAMETER_VALUE", f"Unknown status '{str(status)[:40]}'")
    with transaction.atomic():
        experiment, run = _run_for(request, pk, write=True)
        experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
        run = MlflowRun.objects.get(pk=run.pk)
        if name:
            Experiment.objects.filter(pk=experiment.pk).update(name=name[:200])
            run.tags["mlflow.runName"] = name
            run.save(update_fields=["tags"])
        if status in ("FINISHED", "FAILED", "KILLED"):
            _flush(experiment, run)
    if status in ("FINISHED", "FAILED", "KILLED"):
        experiment.refresh_from_db()
        target = Status.COMPLETED if status == "FINISHED" else Status.FAILED
        error = "" if target == Status.COMPLETED else f"The MLflow run ended as {status}"
        if not ingest.end(experiment, target, error):
            raise MlflowError("INVALID_PARAMETER_VALUE", f"The run is {experiment.status}: it cannot end as {status}")
    experiment.refresh_from_db()
    return {"run_info": _run_json(experiment, MlflowRun.objects.get(pk=run.pk))["info"]}


def _flush(experiment: Experiment, run: MlflowRun) -> None:
    """Record the pending round (inside the caller's transaction, which holds the run's row)."""
    if run.pending:
        reports = _reports([run.pending])
        run.pending = None
        run.save(update_fields=["pending"])
        ingest.record(experiment.pk, reports)


def _reports(rounds: list[dict]) -> list[ingest.Report]:
    body = {
        "rounds": [
            {"round": r["round"], "metrics": {k: _value(k, v[0]) for k, v in r["metrics"].items()}} for r in rounds
        ]
    }
    return ingest.parse_batch(body)


# --- params, tags, metrics ----------------------------------------------------------------------


def _log(request: Request, body: dict, *, metrics=(), params=(), tags=None) -> dict:
    with transaction.atomic():
        experiment, run = _run_for(request, _run_id(body), write=True)
        # One writer per run at a time: pending-round bookkeeping sees every earlier call.
        experiment = Experiment.objects.select_for_update().get(pk=experiment.pk)
        run = MlflowRun.objects.get(pk=run.pk)
        if (metrics or params) and experiment.status not in ingest.ACCEPTING:
            raise MlflowError("INVALID_PARAMETER_VALUE", f"The run is {experiment.status}: it takes no more values")
        if params:
            _set_params(experiment, params)
        if tags:
            run.tags.update(tags)
        if metrics:
            _add_metrics(experiment, run, metrics)
        run.save()
    return {}


def _set_params(experiment: Experiment, params) -> None:
    spec = dict(experiment.spec or {})
    for key, value in params:
        if key in spec and str(spec[key]) != value:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"Changing param values is not allowed. Param with key='{key[:60]}' was already logged with value='{str(spec[key])[:60]}'",
            )
        spec[key] = value
    if len(str(spec)) > MAX_CONFIG_CHARS:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", f"The run's params are at most {MAX_CONFIG_CHARS} characters as text"
        )
    Experiment.objects.filter(pk=experiment.pk).update(spec=spec)


def _add_metrics(experiment: Experiment, run: MlflowRun, metrics) -> None:
    """Step 0: run-level values. Step r: a value of round r, pending until a later step comes."""
    complete = []
    pending = run.pending
    recorded = experiment.current_round
    for key, value, step, ts in sorted(metrics, key=lambda m: m[2]):
        if key not in run.keys:
            run.keys.append(key)
        if step == 0:
            run.run_metrics[key] = [value, ts]
        elif pending and step == pending["round"]:
            pending["metrics"][key] = [value, ts]
        elif step > (pending["round"] if pending else recorded):
            if pending:
                complete.append(pending)
            pending = {"round": step, "metrics": {key: [value, ts]}}
        else:
            stored = _history(experiment, run, key, rounds_only=True).get(step)
            if stored is None or stored != float(value):
                last = pending["round"] if pending else recorded
                raise MlflowError(
                    "INVALID_PARAMETER_VALUE",
                    f"'{key}' at step {step} goes backwards: FedWeb records a metric once per round, and round {last} has been logged",
                )
    if pending:
        _reports([pending])  # judged now (name budget aside), so a bad value is refused at its own call
    if len(run.keys) > ingest.MAX_NAMES_PER_ROUND * 4:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", f"A run logs at most {ingest.MAX_NAMES_PER_ROUND * 4} metric names"
        )
    run.pending = pending
    if complete:
        ingest.record(experiment.pk, _reports(complete))


@mlflow_view(["POST"])
def log_parameter(request: Request, body: dict) -> dict:
    return _log(request, body, params=_param_pairs([{"key": body.get("key"), "value": body.get("value")}]))


@mlflow_view(["POST"])
def set_tag(request: Request, body: dict) -> dict:
    return _log(request, body, tags=_tags([{"key": body.get("key"), "value": body.get("value")}]))


@mlflow_view(["POST"])
def log_metric(request: Request, body: dict) -> dict:
    one = {k: body.get(k) for k in ("key", "value", "step", "timestamp")}
    return _log(request, body, metrics=_metric_items([one]))


@mlflow_view(["POST"])
def log_batch(request: Request, body: dict) -> dict:
    return _log(
        request,
        body,
        metrics=_metric_items(body.get("metrics") or []),
        params=_param_pairs(body.get("params") or []),
        tags=_tags(body.get("tags") or []),
    )


def _history_all(experiment: Experiment, run: MlflowRun) -> dict[str, tuple[list, list, list]]:
    """{key: (values, timestamps, steps)} of every key the script logged, in step order."""
    rows = list(RoundMetric.objects.filter(experiment=experiment).order_by("round"))
    custom = dict(CustomMetric.objects.filter(experiment=experiment).values_list("round", "values"))
    out = {}
    for key in run.keys:
        values, stamps, steps = [], [], []
        if key in run.run_metrics:
            values.append(run.run_metrics[key][0]), stamps.append(run.run_metrics[key][1]), steps.append(0)
        column = COLUMN.get(key)
        for row in rows:
            value = getattr(row, column) if column else custom.get(row.round, {}).get(key)
            if value is not None and (column or key in custom.get(row.round, {})):
                values.append(value), stamps.append(_ms(row.recorded)), steps.append(row.round)
        if run.pending and key in run.pending["metrics"]:
            value, ts = run.pending["metrics"][key]
            values.append(value), stamps.append(ts), steps.append(run.pending["round"])
        out[key] = (values, stamps, steps)
    return out


def _history(experiment: Experiment, run: MlflowRun, key: str, *, rounds_only: bool = False) -> dict[int, float]:
    values, _, steps = _history_all(experiment, run).get(key, ([], [], []))
    return {s: float(v) for v, s in zip(values, steps, strict=True) if not (rounds_only and s == 0)}


@mlflow_view(["GET"])
def metric_history(request: Request, body: dict) -> dict:
    experiment, run = _run_for(request, _run_id(body), write=False)
    key = _field(body, "metric_key")
    values, stamps, steps = _history_all(experiment, run).get(key, ([], [], []))
    return {
        "metrics": [
            {"key": key, "value": v, "timestamp": t, "step": s} for v, t, s in zip(values, stamps, steps, strict=True)
        ]
    }


@extend_schema(exclude=True)
@api_view(["GET", "POST", "PUT", "PATCH", "DELETE"])
@authentication_classes([])
@permission_classes([AllowAny])
def unsupported(request: Request, rest: str = "") -> Response:
    """Every other path under the MLflow prefixes: MLflow's error shape, never a 500."""
    if rest.startswith(UNSUPPORTED) or "artifacts" in request.path:
        return _error(
            "ENDPOINT_NOT_FOUND",
            f"FedWeb serves the MLflow tracking subset (experiments, runs, params, tags, metrics); "
            f"'{rest[:80]}' (artifacts, model registry, traces, search) is not supported",
        )
    return _error("ENDPOINT_NOT_FOUND", f"No MLflow endpoint '{rest[:80]}' on FedWeb")
