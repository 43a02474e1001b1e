from django.urls import path

from orchestrator.live import consumers
from orchestrator.live import sweeps as sweep_live

websocket_urlpatterns = [
    path("ws/experiments/<int:experiment_id>/", consumers.ExperimentConsumer.as_asgi()),
    path("ws/workers/", consumers.WorkersConsumer.as_asgi()),
    path("ws/sweeps/<int:sweep_id>/", sweep_live.SweepConsumer.as_asgi()),
]
