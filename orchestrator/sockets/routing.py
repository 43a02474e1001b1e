from django.urls import path

from orchestrator.sockets import consumers
from orchestrator.sockets import sweeps as sweep_live

websocket_urlpatterns = [
    path("ws/experiments/<int:experiment_id>/", consumers.ExperimentConsumer.as_asgi()),
    path("ws/workers/", consumers.WorkersConsumer.as_asgi()),
    path("ws/sweeps/<int:sweep_id>/", sweep_live.SweepConsumer.as_asgi()),
]
