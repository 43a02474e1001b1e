"""ASGI entry point for daphne: Django views over HTTP, consumers over WebSockets."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "fedweb.settings")
# Build the HTTP app first: it sets Django up before the consumers import models.
django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402

if settings.SERVE_STATIC:
    # A self-hosted install runs one web process and no separate file server: let it serve /static/.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from orchestrator.live.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
