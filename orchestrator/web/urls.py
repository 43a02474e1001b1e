from django.urls import path

from orchestrator.web.views import compare, controls, downloads, health, pages, previews, sweep_sharing, sweeps, workers

# URL names are a contract with the REST API and the permission tests: keep them stable.
urlpatterns = [
    path("", pages.experiment_list, name="experiment_list"),
    path("healthz", health.healthz, name="healthz"),
    path("experiments/statuses.json", pages.experiment_statuses, name="experiment_statuses"),
    path("experiments/new/", pages.experiment_new, name="experiment_new"),
    path("experiments/new/bandwidth.json", previews.preview_bandwidth, name="experiment_preview_bandwidth"),
    path("experiments/new/partition.json", previews.preview_partition, name="experiment_preview_partition"),
    path("experiments/new/resources.json", previews.preview_resources, name="experiment_preview_resources"),
    path("experiments/new/privacy.json", previews.preview_privacy, name="experiment_preview_privacy"),
    path("experiments/<int:pk>/", pages.experiment_detail, name="experiment_detail"),
    path("experiments/<int:pk>/rounds.csv", downloads.experiment_rounds_csv, name="experiment_rounds_csv"),
    path("experiments/<int:pk>/rounds.json", downloads.experiment_rounds_json, name="experiment_rounds_json"),
    path("experiments/<int:pk>/report.html", downloads.experiment_report, name="experiment_report"),
    path("experiments/<int:pk>/pause/", controls.experiment_action, {"action": "pause"}, name="experiment_pause"),
    path("experiments/<int:pk>/resume/", controls.experiment_action, {"action": "resume"}, name="experiment_resume"),
    path("experiments/<int:pk>/cancel/", controls.experiment_action, {"action": "cancel"}, name="experiment_cancel"),
    path("experiments/<int:pk>/delete/", controls.experiment_delete, name="experiment_delete"),
    path("experiments/<int:pk>/priority/", controls.experiment_priority, name="experiment_priority"),
    path("share/<str:token>/", pages.experiment_shared, name="experiment_shared"),
    path("compare/", compare.experiment_compare, name="experiment_compare"),
    path("sweeps/", sweeps.sweep_list, name="sweep_list"),
    path("sweeps/new/", sweeps.sweep_new, name="sweep_new"),
    path("sweeps/<int:pk>/", sweeps.sweep_detail, name="sweep_detail"),
    path("sweeps/<int:pk>/cancel/", sweeps.sweep_cancel, name="sweep_cancel"),
    path("sweeps/<int:pk>/live.json", sweep_sharing.sweep_live, name="sweep_live"),
    path("sweeps/<int:pk>/sharing/", sweep_sharing.sweep_sharing, name="sweep_sharing"),
    path("sweeps/<int:pk>/delete/", sweeps.sweep_delete, name="sweep_delete"),
    path("workers/", workers.worker_list, name="worker_list"),
    path("workers.json", workers.worker_list_json, name="worker_list_json"),
]
