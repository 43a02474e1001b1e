"""An experiment's scheduling priority: read by the ``priority`` policy (higher first, then FIFO),
changed by those who may control the experiment, from the dashboard or the API.

Only the ``priority`` column changes: what is already sent stays sent; the new value counts from
the queue's next scheduling decision.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from fedweb.inputs import parse_int
from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment

MIN_PRIORITY, MAX_PRIORITY = -1000, 1000


class PriorityError(ValueError):
    """A priority we refuse; the message names the field."""


def parse_priority(raw) -> int:
    """A priority from a form or JSON value: a whole number in [MIN_PRIORITY, MAX_PRIORITY]."""
    text = str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else raw
    value = parse_int(text) if isinstance(text, str) else None
    if value is None or not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise PriorityError(f"priority must be a whole number between {MIN_PRIORITY} and {MAX_PRIORITY}")
    return value


def set_priority(experiment: Experiment, value: int, *, by: str = "") -> None:
    """Store ``value`` as the experiment's priority and say so in its log."""
    Experiment.objects.filter(pk=experiment.pk).update(priority=value)
    experiment.priority = value
    experiment.log("info", f"Priority set to {value}" + (f" by {by}" if by else ""))


@login_required
@require_POST
def experiment_priority(request: HttpRequest, pk: int) -> HttpResponse:
    """The dashboard's priority form."""
    experiment = access.get_experiment_for_user(request.user, pk, control=True)
    try:
        set_priority(experiment, parse_priority(request.POST.get("priority")), by=request.user.username)
    except PriorityError as e:
        messages.error(request, str(e))
    return redirect("experiment_detail", pk)


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
def api_priority(request: Request, pk: int) -> Response:
    """Set the priority the ``priority`` policy orders by (higher first); control rights needed."""
    experiment = access.get_experiment_for_user(request.user, pk, control=True)
    body = request.data if isinstance(request.data, dict) else {}
    try:
        value = parse_priority(body.get("priority"))
    except PriorityError as e:
        return Response({"priority": [str(e)]}, status=status.HTTP_400_BAD_REQUEST)
    set_priority(experiment, value, by=request.user.username)
    return Response({"id": experiment.pk, "priority": value})
