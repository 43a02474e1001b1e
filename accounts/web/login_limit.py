"""The login rate limit: django-axes, keyed by username and client address.

Axes counts failures through Django's ``user_login_failed`` signal and refuses further attempts in
``LoginLimitBackend`` (first in ``AUTHENTICATION_BACKENDS``); ``AxesMiddleware`` then replaces the
page with ``lockout_response``. Settings: ``LOGIN_FAILURE_LIMIT``, ``LOGIN_COOLOFF_MINUTES``.
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_ip_address
from axes.utils import reset
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

STATUS = 429


class LoginLimitBackend(AxesStandaloneBackend):
    """Axes' check, except for ``authenticate()`` calls that have no request to key a limit on.

    Those come from code, not from a client: ``Client.login()`` in tests, management commands.
    Every login a client can reach (the login page, ``POST /api/token/``) passes its request.
    """

    def authenticate(self, request: HttpRequest | None, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def lockout_message() -> str:
    minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
    return f"Too many failed login attempts for this account from your address: try again in {minutes} minutes."


def lockout_response(request: HttpRequest, original_response=None, credentials=None) -> HttpResponse:
    """429: JSON for the API, the login page with the message as its error for the form."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": lockout_message()}, status=STATUS)
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form = AuthenticationForm(request, initial={"username": username})
    ctx = {"form": form, "lockout": lockout_message(), "next": request.POST.get("next", "")}
    return render(request, "registration/login.html", ctx, status=STATUS)


def clear_failures(request: HttpRequest, username: str) -> None:
    """Forget the failures of ``username`` from this address: a login that does not go through
    ``django.contrib.auth.login`` (an API token) must reset the count as a page login does."""
    address = get_client_ip_address(request)
    if address and username:  # axes' reset() with neither would clear every record
        reset(ip=address, username=username)
