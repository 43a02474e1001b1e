"""The REST API: the same rules as the pages, asked of ``orchestrator.experiments.access``.

Errors: 400 ``{"field": ["message"]}``, spec errors ``{"spec": {"data.alpha": ["data.alpha must be
> 0"]}}``; 401 without credentials; 404 for experiments you may not see; 403 for ones you may see
but not change; 409 ``{"detail", "status"}`` for a transition the current status doesn't allow.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import renderers, serializers, status
from rest_framework.decorators import api_view, renderer_classes
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Membership
from fedweb.inputs import MAX_INT, int_value, parse_int
from orchestrator.api.runs import LIST_PARAMS, RunsPageSerializer, list_runs
from orchestrator.api.serializers import (
    ExperimentCreateSerializer,
    ExperimentQueuedSerializer,
    ExperimentSerializer,
    RoundSerializer,
    TeamSerializer,
    WordsSerializer,
)
from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.round_table import rounds_csv_response
from orchestrator.fleet.priority import PriorityError, set_priority

ACTIONS = ("start", "pause", "resume", "cancel")


class CSVRenderer(renderers.BaseRenderer):
    """Lets ``Accept: text/csv`` through content negotiation; the view writes the CSV itself."""

    media_type = "text/csv"
    format = "csv"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data if isinstance(data, str | bytes) else str(data)


@extend_schema(methods=["GET"], parameters=LIST_PARAMS, responses=RunsPageSerializer)
@extend_schema(methods=["POST"], request=ExperimentCreateSerializer, responses={201: ExperimentQueuedSerializer})
@api_view(["GET", "POST"])
def experiments(request: Request) -> Response:
    """List (the runs table: ``q``, ``columns``, ``sort``, ``group``, ``target``, in pages) or create."""
    if request.method == "POST":
        return _create(request)
    return list_runs(request)


def _create(request: Request) -> Response:
    serializer = ExperimentCreateSerializer(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    experiment = serializer.save()
    body = ExperimentQueuedSerializer(_reload(request, experiment.pk), context={"request": request}).data
    return Response(body, status=status.HTTP_201_CREATED)


@extend_schema(methods=["GET"], responses=ExperimentSerializer)
@extend_schema(methods=["PATCH"], request=WordsSerializer, responses=ExperimentSerializer)
@extend_schema(methods=["DELETE"], responses={204: None})
@api_view(["GET", "PATCH", "DELETE"])
def experiment(request: Request, pk: int) -> Response:
    """Read, delete, or (PATCH) change its name, description, tags or notes: each change is recorded
    with who made it and when."""
    if request.method == "DELETE":
        access.get_experiment_for_user(request.user, pk, delete=True).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
    if request.method == "PATCH":
        experiment = access.get_experiment_for_user(request.user, pk, control=True)
        if not isinstance(request.data, dict):
            raise ValidationError({"non_field_errors": ["A JSON object of name, description, tags, notes"]})
        try:
            experiment.edit_words(request.user, dict(request.data))
        except DjangoValidationError as e:
            raise ValidationError(e.message_dict) from None
    return Response(ExperimentSerializer(_reload(request, pk), context={"request": request}).data)


@extend_schema(
    request=None,
    responses={
        200: ExperimentQueuedSerializer,
        409: OpenApiResponse(description="Not allowed in the current status"),
    },
)
@api_view(["POST"])
def experiment_action(request: Request, pk: int, action: str) -> Response:
    """Start, pause, resume or cancel; pause and cancel take effect at the end of the running round.
    ``warnings`` says when a started or resumed run has no live worker to take it."""
    experiment = access.get_experiment_for_user(request.user, pk, control=True)
    if not getattr(experiment, action)(by=request.user.username):
        detail = f"Cannot {action} an experiment that is {experiment.status}"
        return Response({"detail": detail, "status": experiment.status}, status=status.HTTP_409_CONFLICT)
    return Response(ExperimentQueuedSerializer(_reload(request, pk), context={"request": request}).data)


@extend_schema(
    request=inline_serializer("PriorityRequest", {"priority": serializers.IntegerField()}),
    responses={
        200: inline_serializer(
            "PriorityResponse", {"id": serializers.IntegerField(), "priority": serializers.IntegerField()}
        ),
        400: OpenApiResponse(description='{"priority": ["priority must be a whole number between -1000 and 1000"]}'),
    },
)
@api_view(["POST"])
def priority(request: Request, pk: int) -> Response:
    """Set the priority the ``priority`` policy orders by (higher first); control rights needed."""
    experiment = access.get_experiment_for_user(request.user, pk, control=True)
    body = request.data if isinstance(request.data, dict) else {}
    try:
        set_priority(experiment, int_value(body.get("priority")), by=request.user.username)
    except PriorityError as e:
        return Response({"priority": [str(e)]}, status=status.HTTP_400_BAD_REQUEST)
    return Response({"id": experiment.pk, "priority": experiment.priority})


@extend_schema(
    parameters=[OpenApiParameter("after", int, description="Only rounds after this one")],
    responses=RoundSerializer(many=True),
)
@api_view(["GET"])
def rounds(request: Request, pk: int) -> Response:
    """Every RoundResult field of each recorded round, in round order."""
    experiment = access.get_experiment_for_user(request.user, pk)
    after = parse_int(request.query_params.get("after", "0"))
    if after is None:
        raise ValidationError({"after": [f"after must be a whole number between -{MAX_INT} and {MAX_INT}"]})
    qs = experiment.rounds.filter(round__gt=after).order_by("round")
    return Response(RoundSerializer(qs, many=True).data)


@extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
@api_view(["GET"])
@renderer_classes([renderers.JSONRenderer, CSVRenderer])
def rounds_csv(request: Request, pk: int) -> HttpResponse:
    experiment = access.get_experiment_for_user(request.user, pk)
    return rounds_csv_response(experiment)


@extend_schema(responses=TeamSerializer(many=True))
@api_view(["GET"])
def teams(request: Request) -> Response:
    """Your teams and your role in each (create experiments in those where you are owner or member)."""
    memberships = Membership.objects.filter(user=request.user).select_related("team").order_by("team__name")
    return Response(
        TeamSerializer([{"id": m.team_id, "name": m.team.name, "role": m.role} for m in memberships], many=True).data
    )


def _reload(request: Request, pk: int) -> Experiment:
    # Through access again, so the row carries the caller's team role like list rows do.
    return access.get_experiment_for_user(request.user, pk)
