"""``/api/``: mounted by fedweb/urls.py."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView
from rest_framework.authtoken.views import obtain_auth_token

from orchestrator import api

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
    path("experiments/<int:pk>/rounds/", api.rounds, name="api_rounds"),
    path("experiments/<int:pk>/rounds.csv", api.rounds_csv, name="api_rounds_csv"),
    path("teams/", api.teams, name="api_teams"),
    path("token/", obtain_auth_token, name="api_token_obtain"),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
]
