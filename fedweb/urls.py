from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("orchestrator.api_urls")),
    path("", include("accounts.urls")),  # /accounts/token/, /teams/, /invite/<token>/, sharing
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("orchestrator.urls")),
]

handler400 = "fedweb.errors.bad_request"
