"""Small readers for environment variables that fail loudly on bad values.

A typo in a deployment's environment should stop the process at start-up with a message that
names the variable, not surface later as a confusing runtime error.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0, true/false, yes/no, on/off, not {raw!r}")


def env_int(name: str, default: int, *, min_value: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {raw!r}") from None
    if min_value is not None and value < min_value:
        raise ImproperlyConfigured(f"{name} must be >= {min_value}, not {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items:
        raise ImproperlyConfigured(f"{name} must be a comma-separated list with at least one entry")
    return items


def env_devices(name: str) -> list[str]:
    """Torch devices of one kind, comma-separated (``cpu,cpu`` or ``cuda:0,cuda:1``); empty when unset."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return []
    devices = [d.strip() for d in raw.split(",") if d.strip()]
    bad = [d for d in devices if not re.fullmatch(r"cpu|cuda(:\d+)?", d)]
    if bad:
        raise ImproperlyConfigured(f"{name}: {bad[0]!r} is not a device (cpu, cuda or cuda:N)")
    if len({d.split(":")[0] for d in devices}) > 1:
        raise ImproperlyConfigured(f"{name} mixes CPU and CUDA devices; one kind per worker ({raw!r})")
    return devices


def env_listen_address(name: str, default_host: str = "127.0.0.1") -> tuple[str, int] | None:
    """``PORT`` or ``HOST:PORT`` (``[::]:PORT`` for IPv6) to listen on; None when unset or empty."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    host, sep, port = raw.rpartition(":")
    host = host.strip("[]") if sep else default_host
    if not port.isdigit() or not 1 <= int(port) <= 65535 or (sep and not host):
        raise ImproperlyConfigured(f"{name} must be a port (9101) or host:port (0.0.0.0:9101), not {raw!r}")
    return host, int(port)


def env_token(name: str, min_length: int = 16) -> str:
    """An optional secret token: empty, or at least ``min_length`` characters."""
    token = os.environ.get(name, "").strip()
    if token and len(token) < min_length:
        raise ImproperlyConfigured(f"{name} must be at least {min_length} characters long")
    return token


def env_choices(name: str, allowed: tuple[str, ...]) -> dict[str, str]:
    """``key=value`` pairs, comma-separated (``cpu=fifo,gpu=pack``), each value one of ``allowed``."""
    raw = os.environ.get(name, "")
    pairs: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        key, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not key:
            raise ImproperlyConfigured(f"{name} must be comma-separated name=value pairs, not {item!r}")
        if value not in allowed:
            raise ImproperlyConfigured(f"{name}: {key!r} must be one of {', '.join(allowed)}, not {value!r}")
        pairs[key] = value
    return pairs


def secret_key(generated_file: Path) -> str:
    """SECRET_KEY, or the contents of SECRET_KEY_FILE (Docker secrets).

    With neither set, a random key is generated once into ``generated_file`` (inside the data
    directory) so a self-hosted install works out of the box and sessions survive restarts.
    """
    key, key_file = os.environ.get("SECRET_KEY"), os.environ.get("SECRET_KEY_FILE")
    if key is not None and key_file is not None:
        raise ImproperlyConfigured("set SECRET_KEY or SECRET_KEY_FILE, not both")
    if key is not None:
        if len(key.strip()) < 16:
            raise ImproperlyConfigured("SECRET_KEY must be at least 16 characters long")
        return key
    if key_file is not None:
        try:
            key = Path(key_file).read_text().strip()
        except OSError as e:
            raise ImproperlyConfigured(f"SECRET_KEY_FILE {key_file!r} cannot be read: {e}") from None
        if len(key) < 16:
            raise ImproperlyConfigured(f"SECRET_KEY_FILE {key_file!r} must hold at least 16 characters")
        return key
    if not generated_file.exists():
        generated_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(generated_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return generated_file.read_text().strip()


POSTGRES_SCHEMES = ("postgres", "postgresql", "pgsql")


def database_config(url: str, data_dir: Path) -> dict:
    """A Django DATABASES entry from ``sqlite:///path`` / ``postgres://user:pw@host:port/db``
    (parsed by dj-database-url; query parameters become OPTIONS).

    The empty string means the default SQLite file under the data directory. SQLite always gets
    the options that let the web process and the workers write at once.
    """
    if not url:
        return _sqlite_config(data_dir / "fedweb.sqlite3")
    scheme = url.partition("://")[0]
    if scheme not in ("sqlite", *POSTGRES_SCHEMES):
        raise ImproperlyConfigured(f"DATABASE_URL must start with sqlite:// or postgres://, not {url!r}")
    try:
        config = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    except ValueError as e:  # e.g. a port that is not a number
        raise ImproperlyConfigured(f"DATABASE_URL {url!r} is malformed: {e}") from None
    if scheme == "sqlite":
        if config["NAME"] in ("", ":memory:"):
            raise ImproperlyConfigured(f"DATABASE_URL {url!r} has no file path")
        return _sqlite_config(Path(config["NAME"]))
    if not config.get("NAME"):
        raise ImproperlyConfigured(f"DATABASE_URL {url!r} names no database")
    return config


def _sqlite_config(path: Path) -> dict:
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            # The web process and the workers write at once: WAL lets readers run beside the writer,
            # IMMEDIATE takes the write lock up front (no deadlock on lock upgrade), and the timeout
            # makes a writer wait for the lock instead of failing with "database is locked".
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        },
    }


def redis_urls(url: str) -> tuple[str, str]:
    """Split one Redis URL into (Celery broker, Channels layer) URLs on DB n and n + 1.

    Keeping them apart means flushing or inspecting one never touches the other.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ImproperlyConfigured(f"REDIS_URL must start with redis://, rediss:// or unix://, not {url!r}")
    if parts.scheme == "unix":
        query = dict(parse_qsl(parts.query))
        db = _redis_db(query.get("db", "0"), url)
        base = f"unix://{parts.path}"
        return f"{base}?db={db}", f"{base}?db={db + 1}"
    db = _redis_db(parts.path.lstrip("/") or "0", url)
    base = f"{parts.scheme}://{parts.netloc}"
    return f"{base}/{db}", f"{base}/{db + 1}"


def _redis_db(raw: str, url: str) -> int:
    if not raw.isdigit() or int(raw) > 14:
        raise ImproperlyConfigured(f"REDIS_URL {url!r}: the database number must be 0..14 (n + 1 is also used)")
    return int(raw)


def broker_url(explicit: str, redis_broker: str) -> str:
    """CELERY_BROKER_URL if set (``amqp://`` for RabbitMQ, or a ``redis://`` URL), else Redis."""
    if not explicit:
        return redis_broker
    if urlsplit(explicit).scheme not in ("amqp", "amqps", "pyamqp", "redis", "rediss"):
        raise ImproperlyConfigured(f"CELERY_BROKER_URL must start with amqp:// or redis://, not {explicit!r}")
    return explicit


# channels-redis waits for a message with a blocking read of 5 s (``RedisChannelLayer.brpop_timeout``)
# and redis-py gives up on a socket that stays silent for ``socket_timeout`` (5 s by default in
# redis-py 8). Equal values made every idle WebSocket die with "Timeout reading from ..." after ~5 s,
# so the socket timeout is set well above the blocking read; it still notices a dead Redis.
CHANNELS_SOCKET_TIMEOUT_SECONDS = 10  # twice the blocking read; a wedged Redis still fails a publish soon


def channel_layers(url: str, prefix: str = "") -> dict:
    """The CHANNEL_LAYERS setting for a Redis URL (the channel-layer database of ``redis_urls``).

    ``prefix`` keeps several FedWeb instances (or test runs) sharing one Redis apart.
    """
    host = {"address": url, "socket_timeout": CHANNELS_SOCKET_TIMEOUT_SECONDS, "socket_keepalive": True}
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                "hosts": [host],
                "prefix": f"{prefix}asgi",
                # The default of 100 silently drops messages to a slow browser; rounds can come fast.
                "capacity": 2000,
                # Undelivered messages older than this are dropped; the database still has them.
                "expiry": 120,
                "group_expiry": 86400,
            },
        }
    }


_BYTE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_BYTE_UNITS.update({"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40})


def env_bytes(name: str, default: int) -> int:
    """A size in bytes: ``34359738368``, ``512MB``, ``32GB``, ``1.5TB`` or ``16GiB``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip().upper().replace(" ", "")
    number = text.rstrip("KMGTIB")
    unit = text[len(number) :]
    try:
        value = float(number) * _BYTE_UNITS[unit]
    except (KeyError, ValueError):
        raise ImproperlyConfigured(f"{name} must be a size such as 32GB or 512MB, not {raw!r}") from None
    if not value >= 1 or value == float("inf"):
        raise ImproperlyConfigured(f"{name} must be a positive size, not {raw!r}")
    return int(value)
