from django.urls import path

from orchestrator import consumers

websocket_urlpatterns = [
    path("ws/experiments/<int:experiment_id>/", consumers.ExperimentConsumer.as_asgi()),
    path("ws/workers/", consumers.WorkersConsumer.as_asgi()),
]
