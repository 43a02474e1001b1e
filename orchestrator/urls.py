from django.urls import path

from orchestrator import priority, views

# URL names are a contract with the REST API and the permission tests: keep them stable.
urlpatterns = [
    path("", views.experiment_list, name="experiment_list"),
    path("healthz", views.healthz, name="healthz"),
    path("experiments/statuses.json", views.experiment_statuses, name="experiment_statuses"),
    path("experiments/new/", views.experiment_new, name="experiment_new"),
    path("experiments/new/bandwidth.json", views.experiment_preview_bandwidth, name="experiment_preview_bandwidth"),
    path("experiments/new/partition.json", views.experiment_preview_partition, name="experiment_preview_partition"),
    path("experiments/<int:pk>/", views.experiment_detail, name="experiment_detail"),
    path("experiments/<int:pk>/rounds.csv", views.experiment_rounds_csv, name="experiment_rounds_csv"),
    path("experiments/<int:pk>/rounds.json", views.experiment_rounds_json, name="experiment_rounds_json"),
    path("experiments/<int:pk>/report.html", views.experiment_report, name="experiment_report"),
    path("experiments/<int:pk>/pause/", views.experiment_pause, name="experiment_pause"),
    path("experiments/<int:pk>/resume/", views.experiment_resume, name="experiment_resume"),
    path("experiments/<int:pk>/cancel/", views.experiment_cancel, name="experiment_cancel"),
    path("experiments/<int:pk>/delete/", views.experiment_delete, name="experiment_delete"),
    path("experiments/<int:pk>/priority/", priority.experiment_priority, name="experiment_priority"),
    path("share/<str:token>/", views.experiment_shared, name="experiment_shared"),
    path("compare/", views.experiment_compare, name="experiment_compare"),
    path("workers/", views.worker_list, name="worker_list"),
    path("workers.json", views.worker_list_json, name="worker_list_json"),
]
