"""``/api/``: mounted by fedweb/urls.py."""

from django.urls import path, re_path
from drf_spectacular.views import SpectacularAPIView

from accounts.web import token_api
from orchestrator.api import docs
from orchestrator.api import experiments as api
from orchestrator.api import sweeps as sweep_api
from orchestrator.api.external import ingestion as external_api
from orchestrator.api.external import mlflow

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
    path("experiments/<int:pk>/priority/", api.priority, name="api_experiment_priority"),
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
    # The MLflow tracking REST subset (orchestrator/api/external/mlflow.py); every other MLflow path
    # answers MLflow's error shape.
    path("2.0/mlflow/experiments/get-by-name", mlflow.experiment_by_name, name="mlflow_experiment_by_name"),
    path("2.0/mlflow/experiments/get", mlflow.experiment_get, name="mlflow_experiment_get"),
    path("2.0/mlflow/experiments/create", mlflow.experiment_create, name="mlflow_experiment_create"),
    path("2.0/mlflow/runs/create", mlflow.run_create, name="mlflow_run_create"),
    path("2.0/mlflow/runs/get", mlflow.run_get, name="mlflow_run_get"),
    path("2.0/mlflow/runs/update", mlflow.run_update, name="mlflow_run_update"),
    path("2.0/mlflow/runs/log-parameter", mlflow.log_parameter, name="mlflow_log_parameter"),
    path("2.0/mlflow/runs/log-metric", mlflow.log_metric, name="mlflow_log_metric"),
    path("2.0/mlflow/runs/log-batch", mlflow.log_batch, name="mlflow_log_batch"),
    path("2.0/mlflow/runs/set-tag", mlflow.set_tag, name="mlflow_set_tag"),
    path("2.0/mlflow/metrics/get-history", mlflow.metric_history, name="mlflow_metric_history"),
    re_path(r"^2\.0/mlflow/(?P<rest>.*)$", mlflow.unsupported),
    re_path(r"^2\.0/mlflow-artifacts/(?P<rest>.*)$", mlflow.unsupported),
    path("teams/", api.teams, name="api_teams"),
    path("token/", token_api.token, name="api_token_obtain"),
    path("token/rotate/", token_api.token_rotate, name="api_token_rotate"),
    path("schema/", SpectacularAPIView.as_view(), name="api_schema"),
    path("docs/", docs.swagger, name="api_docs"),
    path("redoc/", docs.redoc, name="api_redoc"),
]
