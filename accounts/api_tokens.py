"""A user's REST API token: at most one, made on request, rotated or revoked at once."""

from __future__ import annotations

from django.db import transaction
from rest_framework.authtoken.models import Token


def current_token(user) -> Token | None:
    """The user's token, or None after a revocation (until one is made again)."""
    return Token.objects.filter(user=user).first()


def rotate_token(user) -> Token:
    """A new key for ``user``; the old one stops working with this call."""
    with transaction.atomic():
        Token.objects.filter(user=user).delete()
        return Token.objects.create(user=user)


def revoke_token(user) -> bool:
    """Delete the user's token, so that no key works until a new one is made; False if there was none."""
    deleted, _ = Token.objects.filter(user=user).delete()
    return deleted > 0
