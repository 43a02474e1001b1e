"""``/api/token/``: obtain a token with username and password (rate-limited), rotate or revoke it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.decorators import api_view, permission_classes
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_tokens import revoke_token, rotate_token
from accounts.web.login_limit import clear_failures

TokenBody = inline_serializer("Token", {"token": serializers.CharField()})
LOCKED = OpenApiResponse(description="Too many failed attempts for this username from this address")


@extend_schema(methods=["POST"], request=AuthTokenSerializer, responses={200: TokenBody, 429: LOCKED})
@extend_schema(methods=["DELETE"], request=None, responses={204: None})
@api_view(["POST", "DELETE"])
@permission_classes([AllowAny])
def token(request: Request) -> Response:
    """POST: your token for ``username`` and ``password`` (made if you have none). DELETE: revoke it."""
    if request.method == "DELETE":
        if not request.user.is_authenticated:
            raise NotAuthenticated()
        revoke_token(request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
    # The Django request, not DRF's wrapper: the rate limiter flags it for AxesMiddleware.
    serializer = AuthTokenSerializer(data=request.data, context={"request": request._request})
    serializer.is_valid(raise_exception=True)
    user = serializer.validated_data["user"]
    clear_failures(request._request, user.get_username())
    key, _ = Token.objects.get_or_create(user=user)
    return Response({"token": key.key})


@extend_schema(request=None, responses={200: TokenBody})
@api_view(["POST"])
@permission_classes([IsAuthenticated])
def token_rotate(request: Request) -> Response:
    """A new token; the one this call was made with (or any other of yours) stops working at once."""
    return Response({"token": rotate_token(request.user).key})
