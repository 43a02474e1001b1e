"""The MLflow wire protocol as FedWeb speaks it: error shapes, bearer-token auth, the view decorator that turns
an MlflowError into MLflow's JSON answer, body parsing and the lookups every endpoint shares
(``orchestrator.api.external.mlflow`` holds the endpoints)."""

from __future__ import annotations

import math
import time

from django.http import Http404
from drf_spectacular.utils import extend_schema
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token
from rest_framework.decorators import api_view, authentication_classes, permission_classes, throttle_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from orchestrator.api.external.auth import RunTokenAuthentication
from orchestrator.api.external.throttle import RunTokenThrottle
from orchestrator.experiments.models import Status
from orchestrator.external import ingest
from orchestrator.external.models import TOKEN_PREFIX, ExternalRun, MlflowExperiment

# MLflow's error codes and the HTTP status its server answers for each.
HTTP_STATUS = {
    "INVALID_PARAMETER_VALUE": 400,
    "MALFORMED_REQUEST": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "REQUEST_LIMIT_EXCEEDED": 429,
}
# Paths (below /api/2.0/mlflow/) of MLflow features FedWeb does not serve: the 404 says so.
UNSUPPORTED = (
    "artifacts", "registered-models", "model-versions", "logged-models", "traces", "runs/search",
    "experiments/search", "runs/delete", "runs/restore", "experiments/delete", "experiments/restore",
    "experiments/update", "runs/log-model", "runs/log-inputs", "runs/log-outputs", "metrics/get-history-bulk",
    "experiments/set-experiment-tag", "runs/delete-tag", "datasets", "scorers", "webhooks", "prompts",
)  # fmt: skip
MAX_BATCH_METRICS, MAX_BATCH_PARAMS, MAX_BATCH_TAGS = 1000, 100, 100
MAX_KEY, MAX_PARAM_VALUE, MAX_TAG_VALUE = 250, 6000, 8000
RUN_STATUS = {
    Status.RUNNING: "RUNNING",
    Status.CRASHED: "RUNNING",  # a silent run: it may report again
    Status.COMPLETED: "FINISHED",
    Status.FAILED: "FAILED",
    Status.CANCELLED: "KILLED",
}
# The columns a standard metric name fills, by the name the script logs.
COLUMN = {**{name: name for name in ingest.STANDARD}, **ingest.ALIASES}


class MlflowError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _error(code: str, message: str) -> Response:
    return Response({"error_code": code, "message": message}, status=HTTP_STATUS[code])


class BearerAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>`` as the mlflow client sends ``MLFLOW_TRACKING_TOKEN``: a
    user's API token (any call), or a run token ``frt_...`` (that run's calls only)."""

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None
        if len(parts) == 2 and parts[1].startswith(TOKEN_PREFIX.encode()):
            return RunTokenAuthentication().authenticate(request)
        if len(parts) != 2 or len(parts[1]) > 200:
            raise exceptions.AuthenticationFailed("Authorization: Bearer <token>, with no spaces in the token")
        token = Token.objects.select_related("user").filter(key=parts[1].decode("ascii", "replace")).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Unknown token: use your FedWeb API token as MLFLOW_TRACKING_TOKEN")
        return token.user, token

    def authenticate_header(self, request) -> str:
        return "Bearer"


class Throttle(RunTokenThrottle):
    """FEDWEB_EXTERNAL_RATE requests per minute per run token, or per user for a user's token."""

    def ident(self, request) -> str | None:
        if isinstance(request.auth, ExternalRun):
            return super().ident(request)
        if not request.user or not request.user.is_authenticated:
            return None
        return f"user-{request.user.pk}"


def mlflow_view(methods: list[str]):
    """An MLflow endpoint: Bearer auth, the per-token rate limit, and every refusal in MLflow's shape."""

    def wrap(func):
        def view(request: Request, *args, **kwargs) -> Response:
            if not request.user or not request.user.is_authenticated:
                return _error("UNAUTHENTICATED", "Set MLFLOW_TRACKING_TOKEN to your FedWeb API token")
            try:
                body = _body(request)
                return Response(func(request, body, *args, **kwargs))
            except MlflowError as e:
                return _error(e.code, str(e))
            except ingest.IngestError as e:
                return _error("INVALID_PARAMETER_VALUE", f"{e.field}: {e}")

        view.__name__ = func.__name__
        view.__doc__ = func.__doc__
        view = throttle_classes([Throttle])(view)
        view = permission_classes([AllowAny])(view)  # the view answers UNAUTHENTICATED in MLflow's shape
        view = authentication_classes([BearerAuthentication, authentication.SessionAuthentication])(view)
        return extend_schema(exclude=True)(_MlflowApiView.wrap(api_view(methods)(view)))

    return wrap


class _MlflowApiView(APIView):
    """DRF's own refusals (bad token, throttled, unparsable body, wrong method) in MLflow's shape."""

    CODES = {
        exceptions.AuthenticationFailed: "UNAUTHENTICATED",
        exceptions.NotAuthenticated: "UNAUTHENTICATED",
        exceptions.PermissionDenied: "PERMISSION_DENIED",
        exceptions.Throttled: "REQUEST_LIMIT_EXCEEDED",
        exceptions.ParseError: "MALFORMED_REQUEST",
        exceptions.UnsupportedMediaType: "MALFORMED_REQUEST",
        exceptions.MethodNotAllowed: "ENDPOINT_NOT_FOUND",
        exceptions.NotFound: "RESOURCE_DOES_NOT_EXIST",
    }

    @classmethod
    def wrap(cls, view):
        handle = view.cls.handle_exception

        def handle_exception(self, exc):
            for kind, code in cls.CODES.items():
                if isinstance(exc, kind):
                    response = _error(code, str(getattr(exc, "detail", exc)))
                    if isinstance(exc, exceptions.Throttled) and exc.wait:
                        response["Retry-After"] = str(math.ceil(exc.wait))
                    return response
            if isinstance(exc, Http404):
                return _error("RESOURCE_DOES_NOT_EXIST", str(exc))
            return handle(self, exc)

        view.cls.handle_exception = handle_exception
        return view


def _body(request: Request) -> dict:
    if request.method == "GET":
        return {k: request.query_params.get(k) for k in request.query_params}
    if not isinstance(request.data, dict):
        raise MlflowError("MALFORMED_REQUEST", "The body must be a JSON object")
    return request.data


def _field(body: dict, name: str, kind=str, *, required: bool = True, default=None):
    value = body.get(name)
    if value is None or value == "":
        if required:
            raise MlflowError("INVALID_PARAMETER_VALUE", f"Missing value for required parameter '{name}'")
        return default
    if kind is int:
        if isinstance(value, str) and value.lstrip("-").isdigit():
            value = int(value)
        if type(value) is not int:
            raise MlflowError("INVALID_PARAMETER_VALUE", f"'{name}' must be an integer (got {value!r:.40})")
        return value
    if not isinstance(value, kind):
        raise MlflowError("INVALID_PARAMETER_VALUE", f"'{name}' must be a {kind.__name__}")
    return value


def _now_ms() -> int:
    return int(time.time() * 1000)


def _ms(when) -> int:
    return int(when.timestamp() * 1000) if when else 0


# --- experiments ------------------------------------------------------------------------------


def _experiment_json(e: MlflowExperiment) -> dict:
    return {
        "experiment_id": str(e.pk),
        "name": e.name,
        "artifact_location": f"mlflow-artifacts:/{e.pk}",
        "lifecycle_stage": "active",
        "creation_time": _ms(e.created),
        "last_update_time": _ms(e.updated),
        "tags": [{"key": k, "value": v} for k, v in e.tags.items()],
    }


def _no_run_token(request: Request, what: str) -> None:
    if isinstance(request.auth, ExternalRun):
        raise MlflowError("PERMISSION_DENIED", f"A run token cannot {what}: use your API token")


def _mlflow_experiment(request: Request, experiment_id) -> MlflowExperiment:
    if str(experiment_id) == "0":
        return MlflowExperiment.objects.get_or_create(owner=request.user, name="Default")[0]
    found = None
    if str(experiment_id).isdigit():
        found = MlflowExperiment.objects.filter(pk=int(experiment_id), owner=request.user).first()
    if found is None:
        raise MlflowError("RESOURCE_DOES_NOT_EXIST", f"No experiment with id={experiment_id}")
    return found


def _tags(raw, limit: int = MAX_BATCH_TAGS) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, list) or len(raw) > limit:
        raise MlflowError("INVALID_PARAMETER_VALUE", f"'tags' must be a list of at most {limit} {{key, value}}")
    tags = {}
    for i, tag in enumerate(raw):
        if not isinstance(tag, dict):
            raise MlflowError("INVALID_PARAMETER_VALUE", f"tags[{i}] must be an object with key and value")
        key, value = _field(tag, "key"), tag.get("value") or ""
        if len(key) > MAX_KEY or not isinstance(value, str) or len(value) > MAX_TAG_VALUE:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE", f"tags[{i}]: key at most {MAX_KEY}, value at most {MAX_TAG_VALUE} characters"
            )
        tags[key] = value
    return tags


def _value(key: str, value):
    # MLflow sends every value as a double: 1234.0 for a byte count FedWeb stores as a whole number.
    if COLUMN.get(key) in ingest.INT_FIELDS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _param_pairs(raw) -> list[tuple[str, str]]:
    if not isinstance(raw, list) or len(raw) > MAX_BATCH_PARAMS:
        raise MlflowError(
            "INVALID_PARAMETER_VALUE", f"'params' must be a list of at most {MAX_BATCH_PARAMS} {{key, value}}"
        )
    pairs = []
    for i, p in enumerate(raw):
        if not isinstance(p, dict):
            raise MlflowError("INVALID_PARAMETER_VALUE", f"params[{i}] must be an object with key and value")
        key, value = _field(p, "key"), p.get("value")
        value = "" if value is None else value
        if not isinstance(value, str) or len(key) > MAX_KEY or len(value) > MAX_PARAM_VALUE:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"params[{i}] ('{key[:60]}'): key at most {MAX_KEY}, value a string of at most {MAX_PARAM_VALUE}",
            )
        pairs.append((key, value))
    return pairs


def _metric_items(raw) -> list[tuple[str, float, int, int]]:
    if not isinstance(raw, list) or len(raw) > MAX_BATCH_METRICS:
        raise MlflowError("INVALID_PARAMETER_VALUE", f"'metrics' must be a list of at most {MAX_BATCH_METRICS} metrics")
    items = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise MlflowError("INVALID_PARAMETER_VALUE", f"metrics[{i}] must be an object with key, value, step")
        key = _field(m, "key")
        value = m.get("value")
        if type(value) not in (int, float) or not math.isfinite(value):
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"metrics[{i}] ('{key[:60]}'): value must be a finite number (got {value!r:.40})",
            )
        if not ingest.NAME.fullmatch(key):
            raise MlflowError(
                "INVALID_PARAMETER_VALUE",
                f"metrics[{i}]: '{key[:60]}' is not a FedWeb metric name (1-64 letters, digits, '_', '.', '/' or '-')",
            )
        step = _field(m, "step", int, required=False, default=0)
        if not 0 <= step <= ingest.MAX_ROUND:
            raise MlflowError(
                "INVALID_PARAMETER_VALUE", f"metrics[{i}] ('{key}'): step is a round from 0 to {ingest.MAX_ROUND}"
            )
        items.append((key, value, step, _field(m, "timestamp", int, required=False, default=_now_ms())))
    return items
