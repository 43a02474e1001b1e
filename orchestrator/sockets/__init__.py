"""The web's WebSocket side: the consumers (access checked on connect and on every ``access``
event), the per-process fan-out of an experiment's events to its sockets, and their routes. What
they forward is what the domain announces (``orchestrator.live``)."""
