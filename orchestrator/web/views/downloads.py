"""What an experiment's page lets you download: its rounds (CSV, JSON) and the offline HTML report.
A public link's ``?token=`` opens them too."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from orchestrator.experiments.access import get_experiment_for_request, login_or_share_token_required
from orchestrator.experiments.round_table import rounds_csv_response, rounds_of
from orchestrator.web.report import render_report


@login_or_share_token_required
def experiment_rounds_csv(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_request(request, pk)
    return rounds_csv_response(experiment, public=bool(request.GET.get("token")))


@login_or_share_token_required
def experiment_rounds_json(request: HttpRequest, pk: int) -> JsonResponse:
    experiment = get_experiment_for_request(request, pk)
    body = {"id": pk, "name": experiment.name, "status": experiment.status, "spec": experiment.spec}
    rounds = rounds_of(experiment, public=bool(request.GET.get("token")))  # a public link names no host
    response = JsonResponse({**body, "rounds": rounds}, json_dumps_params={"indent": 1})
    response["Content-Disposition"] = f'attachment; filename="experiment-{pk}-rounds.json"'
    return response


@login_or_share_token_required
def experiment_report(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_request(request, pk)
    # Through the public link, the report names no worker host (as the share page doesn't).
    public = bool(request.GET.get("token"))
    response = HttpResponse(render_report(experiment, public=public), content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="fedweb-experiment-{pk}-report.html"'
    return response
