"""The API reference pages (Swagger UI at ``/api/docs/``, Redoc at ``/api/redoc/``): drf-spectacular's
views, served from FedWeb's own static files, with a way back to the app.

Their bundles reach for other hosts on their own: Redoc's sidebar shows a "Redocly" logo it loads
from cdn.redoc.ly, whatever page it is given. A Content-Security-Policy that allows this server
alone keeps every such request on the machine (the browser never sends it; Redoc then leaves the
logo out): FedWeb must work with no network at run time, and a docs page should not tell a third
party who reads it.
"""

from __future__ import annotations

from functools import wraps

from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

# Inline script and style: the two pages' own bootstrap code and the bundles' styles; blob: for
# Redoc's search worker; data: for the icons the bundles inline.
SAME_ORIGIN_ONLY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'; "
    "frame-ancestors 'self'"
)


def same_origin_only(view):
    """``view`` with a policy that lets its page load nothing from another host."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = SAME_ORIGIN_ONLY
        return response

    return wrapped


swagger = same_origin_only(SpectacularSwaggerView.as_view(url_name="api_schema"))
redoc = same_origin_only(SpectacularRedocView.as_view(url_name="api_schema"))
