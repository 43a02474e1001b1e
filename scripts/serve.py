"""``python -m scripts.serve [-b HOST] [-p PORT] [--processes N]``: N daphne processes behind one port.

One daphne process sends every live event to its sockets one after another on one core, so a page
watched by hundreds of viewers is bounded by that core (``python -m benchmarks viewers``). Here
this process opens the listening socket once and starts N daphne processes on it (``daphne --fd``);
the kernel hands each new connection to one of them. Each process subscribes once per experiment
that its sockets watch (``orchestrator.sockets.fanout``), so every socket gets every event, whichever
process holds it. Per-process state is only the fan-out and caches; sessions, access and rounds
live in the database and Redis.

It lives in ``scripts`` (whose package imports nothing), not ``fedweb``, whose package loads the
Celery app and with it torch: this parent only holds the socket and watches its children.

``--processes`` defaults to ``$FEDWEB_WEB_PROCESSES`` (1). With SQLite, keep 1: its writes lock
the whole file. If one daphne exits, the others are stopped and the exit code is passed on, so the
supervisor (``make run``, docker-compose's restart policy) sees the failure.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

APPLICATION = "fedweb.asgi:application"


def listen(host: str, port: int, backlog: int = 1024) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def daphne_command(fd: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "daphne", "--fd", str(fd), *extra, APPLICATION]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--processes must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--processes must be >= 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.serve", description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--bind", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, default=8000)
    parser.add_argument(
        "--processes", type=positive_int, default=positive_int(os.environ.get("FEDWEB_WEB_PROCESSES") or "1")
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to each daphne (e.g. --access-log)
    sock = listen(args.bind, args.port)
    children = [
        subprocess.Popen(daphne_command(sock.fileno(), extra), pass_fds=(sock.fileno(),)) for _ in range(args.processes)
    ]
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    while not stopping:
        exited = [c for c in children if c.poll() is not None]
        if exited:
            code = exited[0].returncode or 1
            print(f"daphne {exited[0].pid} exited with {exited[0].returncode}; stopping the others", file=sys.stderr)
            break
        time.sleep(0.2)
    for child in children:
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + 15
    for child in children:
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    sock.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
