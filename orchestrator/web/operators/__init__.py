"""What operators and their monitors read: /healthz and the Prometheus /metrics endpoint."""
