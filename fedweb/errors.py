"""Error pages Django renders itself, before or outside a view (``handler400`` in fedweb/urls.py).

Django turns ``RequestDataTooBig`` (a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, raised wherever
``request.POST`` or ``request.body`` is first read, often by the CSRF middleware) into a plain 400;
the client deserves to know it was the size, so it gets 413 here. API paths answer in JSON.
"""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from fedweb.parsers import too_large_message


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """400 as Django answers it, except 413 for a body over the limit; JSON under /api/."""
    too_big = isinstance(exception, RequestDataTooBig)
    if request.path.startswith("/api/"):
        detail = too_large_message() if too_big else "Bad request"
        return JsonResponse({"detail": detail}, status=413 if too_big else 400)
    if too_big:
        return HttpResponse(f"<h1>Request too large</h1><p>{too_large_message()}.</p>", status=413)
    return defaults.bad_request(request, exception)
