"""ASGI entry point for daphne: Django views over HTTP, consumers over WebSockets."""

import gc
import os

import django
from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedweb.settings")


class OneThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, with the middleware chain and the view run in one thread per request,
    as under WSGI.

    Django runs the chain in async mode under ASGI, and calls each ``MiddlewareMixin`` middleware's
    ``process_request`` and ``process_response`` (and ``process_view``) in a thread of its own:
    with the 9 middlewares of settings.MIDDLEWARE, a report request went back and forth between the
    event loop and its sync thread 17 times (~20% of its CPU, and each hop waits for a turn of a
    loop that also serves every socket: ``python -m benchmarks ingest_live``). Every view here is
    sync, so the request is handed to a thread once and comes back with its response. An async view
    would still work (Django runs it on the loop with ``async_to_sync``); reading the body and
    sending the response stay on the loop.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


# Build the HTTP app first: it sets Django up before the consumers import models.
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does
django_asgi_app = OneThreadASGIHandler()

from django.conf import settings  # noqa: E402

if settings.SERVE_STATIC:
    # A self-hosted install runs one web process and no separate file server: let it serve /static/.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from orchestrator.sockets.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# What the imports made lives as long as the process (Django, DRF, Channels and the engine's spec,
# registry and round fields, ~110,000 objects; torch is not among them: the engine's estimates run in
# a helper process, fedweb_engine/estimates/helper.py): out of the collector's sight, so a full
# collection does not walk them. Its pause grows with what it walks (~0.3 s for ~300,000 objects on the
# loaded 2-core VM), a pause for every request and socket of the process, about once per 600 reports,
# against the p99 the ingestion benchmark aims for (python -m benchmarks ingest_live); what start-up
# leaves is measured by python -m benchmarks web_startup.
gc.collect()
gc.freeze()
