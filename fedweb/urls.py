from django.contrib import admin
from django.urls import include, path

from orchestrator.metrics_view import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("orchestrator.api_urls")),
    path("", include("accounts.urls")),  # /accounts/token/, /teams/, /invite/<token>/, sharing
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("orchestrator.urls")),
    path("metrics", metrics, name="metrics"),  # Prometheus; see orchestrator/metrics_view.py
]

handler400 = "fedweb.errors.bad_request"
