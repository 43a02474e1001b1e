"""Run-scoped tokens: ``Authorization: Bearer frt_...`` writes one external run and nothing else.

Only the ingestion views list ``RunTokenAuthentication``; every other API view keeps the user-token
and session classes, which don't know a run token, so a leaked one gets 401 there: it cannot read
experiments or create runs.
"""

from __future__ import annotations

from django.utils import timezone
from rest_framework import authentication, exceptions, permissions

from orchestrator.external.models import TOKEN_PREFIX, ExternalRun, hash_token


class RunTokenAuthentication(authentication.BaseAuthentication):
    """``request.user`` is the run's owner, ``request.auth`` its ``ExternalRun``."""

    keyword = "Bearer"

    def authenticate(self, request):
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword.lower().encode():
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Bearer <run token>, with no spaces in the token")
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The run token is not ASCII") from None
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            raise exceptions.AuthenticationFailed("Not a run token")
        try:  # get, not first: the hash is unique, and first's ORDER BY cost a report ~0.2 ms of CPU
            run = ExternalRun.objects.select_related("experiment__owner").get(token_hash=hash_token(token))
        except ExternalRun.DoesNotExist:
            raise exceptions.AuthenticationFailed("Unknown run token") from None
        if run.revoked:
            raise exceptions.AuthenticationFailed("The run token was revoked")
        if not run.usable(timezone.now()):
            raise exceptions.AuthenticationFailed("The run token expired")
        if not run.experiment.owner.is_active:
            raise exceptions.AuthenticationFailed("The run's owner is inactive")
        return run.experiment.owner, run

    def authenticate_header(self, request) -> str:
        return self.keyword


class HasRunToken(permissions.BasePermission):
    """Only a run token passes; the view then checks it is the token of the run in the URL."""

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, ExternalRun)
