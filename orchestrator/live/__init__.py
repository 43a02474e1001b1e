"""Live pages: the WebSocket payloads (events), their fan-out inside a web process, and the consumers."""
