"""`make run`: Redis (embedded when none answers), migrations, the demo, daphne and one CPU worker.

Everything started here is stopped on Ctrl-C (or SIGTERM), and everything stops if one dies.
The URL is printed only once ``/healthz`` answers 200 (daphne listens, the database and Redis
answer), so the first click never meets "connection refused". ``--no-demo`` skips the demo
experiments (the tests start it that way: the demo's runs would keep the worker busy).
DEBUG is off unless asked for (`DEBUG=1 make run`): its pages list every URL pattern to anyone,
public-link visitors included. Static files are served by the ASGI app either way, and a 500's
traceback still reaches this terminal through the `django.request` logger.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedweb.localredis import answers, free_port, redis_server_binary  # noqa: E402

children: list[subprocess.Popen] = []


def start(args: list[str], env: dict, **kw) -> subprocess.Popen:
    proc = subprocess.Popen(args, cwd=ROOT, env=env, **kw)
    children.append(proc)
    return proc


def stop_all(*_args) -> None:
    for proc in reversed(children):
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + 15
    for proc in reversed(children):
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
    children.clear()


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of every process `make run` starts: the caller's, with DEBUG off by default."""
    env = dict(environ)
    env.setdefault("DEBUG", "0")
    return env


def ensure_redis(env: dict, data_dir: Path) -> str:
    url = env.get("REDIS_URL")
    if url:
        return url
    if answers("redis://127.0.0.1:6379/0"):
        return "redis://127.0.0.1:6379/0"
    port = free_port()
    folder = data_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    args = [redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--dir", str(folder),
            "--pidfile", str(folder / "redis.pid"), "--save", "60 1", "--appendonly", "no"]  # fmt: skip
    start(args, env, stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 15
    while not answers(url):
        if time.monotonic() > deadline:
            raise RuntimeError("the embedded Redis did not start")
        time.sleep(0.1)
    print(f"Started the embedded Redis on port {port} (no Redis answered on 127.0.0.1:6379)")
    return url


def healthy(url: str) -> bool:
    """Whether ``url`` (``/healthz``) answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):  # refused, not yet listening, or a 503
        return False


def wait_until_healthy(url: str, timeout: float = 120.0) -> None:
    """Return once ``url`` answers 200; raise RuntimeError if a child exits or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not healthy(url):
        if any(proc.poll() is not None for proc in children):
            raise RuntimeError("a process exited before the web server answered")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer 200 within {timeout:.0f} s")
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run FedWeb locally: Redis, daphne and one CPU worker.")
    parser.add_argument("--no-demo", action="store_true", help="do not create the demo user and experiments")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
    env = child_env(os.environ)
    data_dir = Path(env.get("FEDWEB_DATA_DIR", ROOT / "var")).resolve()
    host, port = env.get("HOST", "127.0.0.1"), env.get("PORT", "8000")
    python = sys.executable
    try:
        env["REDIS_URL"] = ensure_redis(env, data_dir)
        subprocess.run([python, "manage.py", "migrate", "--no-input", "-v", "0"], cwd=ROOT, env=env, check=True)
        if not args.no_demo:
            subprocess.run([python, "manage.py", "demo"], cwd=ROOT, env=env, check=True)
        # scripts.serve: $FEDWEB_WEB_PROCESSES daphne processes (1 by default: SQLite) on one port.
        start([python, "-m", "scripts.serve", "-b", host, "-p", port], env)
        start([python, "-m", "celery", "-A", "fedweb", "worker", "-Q", "cpu", "--concurrency", "1", "-l", "info"], env)
        probe = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # a wildcard bind answers on loopback
        wait_until_healthy(f"http://{probe}:{port}/healthz")
        login = "" if args.no_demo else "log in as demo / demo; "
        print(f"\nFedWeb is running at http://{host}:{port}/  ({login}Ctrl-C stops everything)\n", flush=True)
        while all(proc.poll() is None for proc in children):
            time.sleep(0.5)
        print("A process exited; stopping the others.", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\nStopping ...")
        return 0
    except subprocess.CalledProcessError as e:
        print(f"{' '.join(e.cmd)} failed with exit code {e.returncode}", file=sys.stderr)
        return 1
    except RuntimeError as e:
        print(f"FedWeb did not start: {e}", file=sys.stderr)
        return 1
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
