"""The ingestion API of external runs, under ``/api/external/runs/``.

- ``POST runs/`` (a user's API token or session): create a run; the answer holds its run token,
  shown only then.
- ``POST runs/<id>/rounds/``, ``runs/<id>/finish/``, ``runs/<id>/fail/`` (that run's token):
  report rounds, end the run.
- ``POST runs/<id>/revoke/`` (the owner's user token): revoke the run token.

Errors: 400 ``{"field": ["message"]}`` and nothing stored; 401 for a missing, unknown, revoked or
expired run token; 404 for another run's id; 409 ``{"detail", "field"}`` for a report that
contradicts what is recorded, or a run that is over; 429 with Retry-After over FEDWEB_EXTERNAL_RATE.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, authentication_classes, permission_classes, throttle_classes
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Team
from orchestrator.api.external.auth import HasRunToken, RunTokenAuthentication
from orchestrator.api.external.throttle import RunTokenThrottle
from orchestrator.api.serializers import TeamAndVisibility
from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment, Kind, Status, Visibility
from orchestrator.external import ingest
from orchestrator.external.models import ExternalRun

MAX_CONFIG_CHARS = 50_000


class ExternalRunCreateSerializer(TeamAndVisibility, serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)
    tags = serializers.ListField(
        child=serializers.CharField(max_length=50), required=False, default=list, max_length=50
    )
    team = serializers.PrimaryKeyRelatedField(queryset=Team.objects.all(), required=False, allow_null=True)
    visibility = serializers.ChoiceField(choices=Visibility.choices, required=False, default=Visibility.PRIVATE)
    config = serializers.DictField(required=False, default=dict, help_text="Free-form JSON, shown as the spec table")
    total_rounds = serializers.IntegerField(required=False, default=0, min_value=0, max_value=ingest.MAX_ROUND)

    def validate_config(self, value: dict) -> dict:
        if len(str(value)) > MAX_CONFIG_CHARS:
            raise serializers.ValidationError(f"config is at most {MAX_CONFIG_CHARS} characters as text")
        return value


class RunTokenScheme(OpenApiAuthenticationExtension):
    """The run token in the OpenAPI document (/api/docs/), as ``runToken``."""

    target_class = "orchestrator.api.external.auth.RunTokenAuthentication"
    name = "runToken"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The run token (frt_...) that POST /api/external/runs/ answered; it writes that run only.",
        }


# The ingestion bodies and answers, for the OpenAPI document; the views judge bodies with ``ingest``.
_ROUND = inline_serializer(
    "ExternalRound",
    {
        "round": serializers.IntegerField(min_value=1, max_value=ingest.MAX_ROUND),
        "metrics": serializers.DictField(
            child=serializers.FloatField(),
            help_text="name: finite number. Standard names (loss, accuracy, test_loss, bytes_up, bytes_down, "
            "participants, round_seconds, memory_mb, ...) fill the round's columns; any other name is a custom metric. "
            f"At most {ingest.MAX_NAMES_PER_ROUND} per round.",
        ),
    },
)
ROUNDS_BODY = inline_serializer(
    "ExternalRounds", {"rounds": serializers.ListField(child=_ROUND, max_length=ingest.MAX_ROUNDS_PER_BATCH)}
)
ROUNDS_ANSWER = inline_serializer(
    "ExternalRoundsRecorded",
    {
        "recorded": serializers.ListField(child=serializers.IntegerField(), help_text="Rounds stored by this request"),
        "duplicates": serializers.ListField(
            child=serializers.IntegerField(), help_text="Rounds already stored with the same values (a resend)"
        ),
    },
)
CREATED = inline_serializer(
    "ExternalRunCreated",
    {
        "id": serializers.IntegerField(),
        "token": serializers.CharField(help_text="The run token: shown only in this answer"),
        "status": serializers.CharField(),
        "dashboard": serializers.URLField(),
        "rounds_url": serializers.URLField(),
    },
)
ENDED = inline_serializer("ExternalRunEnded", {"id": serializers.IntegerField(), "status": serializers.CharField()})
FAIL_BODY = inline_serializer(
    "ExternalRunFailure", {"error": serializers.CharField(required=False, help_text="Shown on the dashboard")}
)
REFUSALS = {
    400: OpenApiResponse(description='{"<field>": ["message"]}: nothing stored'),
    401: OpenApiResponse(description="Missing, unknown, revoked or expired run token"),
    404: OpenApiResponse(description="Another run's id"),
    409: OpenApiResponse(description='{"detail", "field"}: contradicts a recorded round, or the run is over'),
    429: OpenApiResponse(
        description="Over FEDWEB_EXTERNAL_RATE requests per minute for this token, counted across all web processes (Retry-After)"
    ),
}


def _run_for_token(request: Request, pk: int) -> Experiment:
    # Another run's id is "not found": a run token learns nothing about other experiments.
    if request.auth.experiment_id != pk:
        raise NotFound("No such run for this token")
    return request.auth.experiment


@extend_schema(request=ExternalRunCreateSerializer, responses={201: CREATED}, tags=["external runs"])
@api_view(["POST"])
def runs(request: Request) -> Response:
    """Create an external run (status running); the answer's ``token`` writes this run only."""
    serializer = ExternalRunCreateSerializer(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    data = dict(serializer.validated_data)
    config = data.pop("config")
    now = timezone.now()
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=request.user, kind=Kind.EXTERNAL, spec=config, status=Status.RUNNING, queue="inline",
            started=now, **data,
        )  # fmt: skip
        _, token = ExternalRun.issue(experiment, expires=now + timedelta(days=settings.FEDWEB_EXTERNAL_TOKEN_DAYS))
    experiment.log("info", f"External run created by {request.user.username}")
    body = {
        "id": experiment.pk,
        "token": token,
        "status": experiment.status,
        "dashboard": request.build_absolute_uri(reverse("experiment_detail", args=[experiment.pk])),
        "rounds_url": request.build_absolute_uri(reverse("api_external_rounds", args=[experiment.pk])),
    }
    return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(
    request=ROUNDS_BODY,
    responses={201: ROUNDS_ANSWER, 200: ROUNDS_ANSWER, **REFUSALS},
    tags=["external runs"],
    description='Report rounds: ``{"rounds": [{"round": 3, "metrics": {"loss": 0.4, "grad/norm": 1.2}}]}``. '
    "Idempotent per round: a resend with the same values is answered 200 and stored once.",
)
@api_view(["POST"])
@authentication_classes([RunTokenAuthentication])
@permission_classes([HasRunToken])
@throttle_classes([RunTokenThrottle])
def rounds(request: Request, pk: int) -> Response:
    """Report ``{"rounds": [{"round": n, "metrics": {name: number}}]}``; idempotent per round."""
    experiment = _run_for_token(request, pk)
    try:
        result = ingest.record(experiment.pk, ingest.parse_batch(request.data))
    except ingest.Conflict as e:
        return Response({"detail": str(e), "field": e.field}, status=status.HTTP_409_CONFLICT)
    except ingest.IngestError as e:
        return Response({e.field: [str(e)]}, status=status.HTTP_400_BAD_REQUEST)
    code = status.HTTP_201_CREATED if result["recorded"] else status.HTTP_200_OK
    return Response(result, status=code)


@extend_schema(request=FAIL_BODY, responses={200: ENDED, **REFUSALS}, tags=["external runs"])
@api_view(["POST"])
@authentication_classes([RunTokenAuthentication])
@permission_classes([HasRunToken])
@throttle_classes([RunTokenThrottle])
def end(request: Request, pk: int, outcome: str) -> Response:
    """Finish (``completed``) or fail the run; ending an ended run the same way again is a no-op."""
    experiment = _run_for_token(request, pk)
    target = Status.COMPLETED if outcome == "finish" else Status.FAILED
    error = ""
    if target == Status.FAILED:
        raw = request.data.get("error", "") if isinstance(request.data, dict) else None
        if not isinstance(raw, str):
            return Response({"error": ["error must be a string"]}, status=status.HTTP_400_BAD_REQUEST)
        error = raw[:5000] or "The script reported a failure"
    if not ingest.end(experiment, target, error):
        detail = f"Cannot {outcome} a run that is {experiment.status}"
        return Response({"detail": detail, "field": "status"}, status=status.HTTP_409_CONFLICT)
    return Response({"id": pk, "status": target})


@extend_schema(
    request=None,
    responses={
        200: inline_serializer(
            "ExternalRunRevoked", {"id": serializers.IntegerField(), "revoked": serializers.BooleanField()}
        )
    },
    tags=["external runs"],
)
@api_view(["POST"])
def revoke(request: Request, pk: int) -> Response:
    """Revoke the run's token (its owner, or whoever may control it); the run keeps its rounds."""
    experiment = access.get_experiment_for_user(request.user, pk, control=True)
    ExternalRun.objects.filter(experiment=experiment).update(revoked=True)
    return Response({"id": pk, "revoked": True})
