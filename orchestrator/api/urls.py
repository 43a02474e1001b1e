"""``/api/``: mounted by fedweb/urls.py."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from accounts import api as token_api
from orchestrator.api import experiments as api
from orchestrator.api import sweeps as sweep_api
from orchestrator.external import api as external_api
from orchestrator.fleet import priority

urlpatterns = [
    path("experiments/", api.experiments, name="api_experiments"),
    path("experiments/<int:pk>/", api.experiment, name="api_experiment"),
    *[
        path(
            f"experiments/<int:pk>/{action}/",
            api.experiment_action,
            {"action": action},
            name=f"api_experiment_{action}",
        )
        for action in api.ACTIONS
    ],
    path("experiments/<int:pk>/priority/", priority.api_priority, name="api_experiment_priority"),
    path("experiments/<int:pk>/rounds/", api.rounds, name="api_rounds"),
    path("experiments/<int:pk>/rounds.csv", api.rounds_csv, name="api_rounds_csv"),
    path("sweeps/", sweep_api.sweeps, name="api_sweeps"),
    path("sweeps/<int:pk>/", sweep_api.sweep, name="api_sweep"),
    path("sweeps/<int:pk>/cancel/", sweep_api.sweep_cancel, name="api_sweep_cancel"),
    path("external/runs/", external_api.runs, name="api_external_runs"),
    path("external/runs/<int:pk>/rounds/", external_api.rounds, name="api_external_rounds"),
    path("external/runs/<int:pk>/finish/", external_api.end, {"outcome": "finish"}, name="api_external_finish"),
    path("external/runs/<int:pk>/fail/", external_api.end, {"outcome": "fail"}, name="api_external_fail"),
    path("external/runs/<int:pk>/revoke/", external_api.revoke, name="api_external_revoke"),
    path("teams/", api.teams, name="api_teams"),
    path("token/", token_api.token, name="api_token_obtain"),
    path("token/rotate/", token_api.token_rotate, name="api_token_rotate"),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api_schema"), name="api_docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api_schema"), name="api_redoc"),
]
