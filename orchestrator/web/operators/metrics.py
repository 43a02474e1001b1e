"""``GET /metrics``: the fleet's Prometheus metrics (orchestrator/fleet/prometheus.py says where each comes from).

With ``FEDWEB_METRICS_TOKEN`` set, every scrape needs ``Authorization: Bearer <token>``. Without
it, only loopback clients may scrape: the metrics name workers and queues, which are nobody
else's business. Behind a reverse proxy on the same host every client looks like loopback, so set
the token there (or keep ``/metrics`` out of the proxy).
"""

from __future__ import annotations

import ipaddress
import logging

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest

from orchestrator.fleet.prometheus import FleetCollector, token_matches

log = logging.getLogger(__name__)
_registry: CollectorRegistry | None = None


def registry() -> CollectorRegistry:
    """This process's registry: the fleet collector and the web process's own CPU and memory."""
    global _registry
    if _registry is None:
        _registry = CollectorRegistry()
        _registry.register(FleetCollector())
        ProcessCollector(registry=_registry)
    return _registry


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    try:
        body = generate_latest(registry())
    except DatabaseError as e:  # the scrape fails visibly (up == 0) instead of reporting zeros
        log.warning("metrics: database unavailable: %s", e)
        return HttpResponse(f"database unavailable: {e}\n", status=503, content_type="text/plain")
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _refusal(request: HttpRequest) -> HttpResponse | None:
    token = settings.FEDWEB_METRICS_TOKEN
    if token:
        if token_matches(request.headers.get("Authorization", ""), token):
            return None
        response = HttpResponse("a bearer token is required (FEDWEB_METRICS_TOKEN)\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if _is_loopback(request.META.get("REMOTE_ADDR", "")):
        return None
    return HttpResponse("metrics are served to loopback only; set FEDWEB_METRICS_TOKEN to scrape from elsewhere\n",
                        status=403, content_type="text/plain")  # fmt: skip


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
