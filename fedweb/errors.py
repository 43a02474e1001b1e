"""Answers Django gives before or outside a view: bodies over the size limit, and ``handler400``.

A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` makes Django raise ``RequestDataTooBig`` where the body
is first read (often in the CSRF middleware), answer a bare 400 and log a traceback at ERROR for
what is a client's mistake. ``body_size_limit`` answers 413 from the announced length before
anything reads the body; ``bad_request`` turns a ``RequestDataTooBig`` that still happens (a body
without Content-Length) into 413 too. API paths answer in JSON.
"""

from __future__ import annotations

import logging

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import sync_and_async_middleware
from django.views import defaults

from fedweb.inputs import parse_int

logger = logging.getLogger(__name__)


@sync_and_async_middleware
def body_size_limit(get_response):
    """Middleware: 413 for a request whose Content-Length exceeds the limit, before it is read."""
    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest):
            return _refuse_if_too_large(request) or await get_response(request)

    else:

        def middleware(request: HttpRequest):
            return _refuse_if_too_large(request) or get_response(request)

    return middleware


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 as Django answers it, except 413 for a body over the limit; JSON under /api/."""
    if isinstance(exception, RequestDataTooBig):
        return too_large(request)
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Bad request"}, status=400)
    return defaults.bad_request(request, exception)


def too_large(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": too_large_message()}, status=413)
    return HttpResponse(f"<h1>Request too large</h1><p>{too_large_message()}.</p>", status=413)


def too_large_message() -> str:
    return f"The request body is larger than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE:,} bytes"


def _refuse_if_too_large(request: HttpRequest) -> HttpResponse | None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    length = parse_int(request.META.get("CONTENT_LENGTH"), minimum=0) or 0
    if limit is None or length <= limit:
        return None
    logger.warning("Refused a %d-byte body to %s (limit %d)", length, request.path, limit)
    return too_large(request)
