from django.contrib import admin
from django.urls import include, path

from orchestrator.web.operators.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("orchestrator.api.urls")),
    path("", include("accounts.web.urls")),  # /accounts/token/, /teams/, /invite/<token>/, sharing
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("orchestrator.web.urls")),
    path("metrics", metrics, name="metrics"),  # Prometheus; see orchestrator/web/operators/metrics.py
]

handler400 = "fedweb.errors.bad_request"
