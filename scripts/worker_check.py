"""An experiment sent through the REST API and run by a real Celery worker: the path a user takes,
end to end, on one machine with nothing set up (scripts/gpu_check.sh runs it on a lent GPU).

    python scripts/worker_check.py --device cuda [--rounds 3] [--timeout 300]
    python scripts/worker_check.py --device cuda --spec '{"compute": {"client_group_size": 4096}, ...}' \
        --expect-log "retrying with client group size"      # the out-of-memory retry

Starts an embedded Redis, migrates a fresh SQLite database in a temporary data folder, starts
daphne and one worker on the device's queue (``gpu`` for CUDA, ``cpu`` otherwise), creates a user,
takes an API token (``POST /api/token/``), posts an experiment (``POST /api/experiments/``,
``"start": true``; ``--spec`` replaces sections of a small CNN run, compute's keys merged) and waits until the worker
completes its rounds. Prints one JSON line: the status, rounds, each round's device, VRAM figures
and seconds, the experiment's log and the worker's last lines. Exits 1 when the run did not
complete on the device within ``--timeout`` (the error names what was seen) or its log lacks
``--expect-log``. The temporary folder is removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedweb.localredis import answers, free_port, redis_server_binary  # noqa: E402

PASSWORD = "worker-check-password"  # a throwaway account in a temporary database


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--spec", type=json.loads, default={}, help="JSON sections merged into the spec")
    parser.add_argument("--expect-log", default="", help="a text the experiment's log must hold")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, database)")
    args = parser.parse_args()
    queue = "gpu" if args.device.startswith("cuda") else "cpu"
    data = Path(tempfile.mkdtemp(prefix="fedweb-worker-check-"))
    children: list[subprocess.Popen] = []
    try:
        env = _environment(data, children)
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
        create = f"from django.contrib.auth import get_user_model; get_user_model().objects.create_user('check', password='{PASSWORD}')"
        subprocess.run([sys.executable, "manage.py", "shell", "-c", create], cwd=ROOT, env=env, check=True)
        port = free_port()
        children.append(
            _start(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "fedweb.asgi:application"],
                env,
                data / "daphne.log",
            )
        )
        children.append(_start([sys.executable, "-m", "celery", "-A", "fedweb", "worker", "-Q", queue, "--concurrency", "1",
                                "-n", f"check-{queue}@%h", "--without-gossip", "--without-mingle", "-l", "info"], env, data / "worker.log"))  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        _wait(lambda: _answers(f"{base}/healthz"), 90, "daphne's /healthz")
        token = _post(f"{base}/api/token/", {"username": "check", "password": PASSWORD})["token"]
        spec = {"rounds": args.rounds, "data": {"dataset": "digits", "num_clients": 20}, "model": {"name": "cnn"},
                "participation": {"clients_per_round": 8}, "compute": {"device": args.device}}  # fmt: skip
        spec |= {
            **args.spec,
            "compute": {**spec["compute"], **args.spec.get("compute", {})},
        }  # sections replaced, compute merged
        experiment = _post(f"{base}/api/experiments/", {"name": "worker check", "spec": spec, "start": True}, token)
        url = f"{base}/api/experiments/{experiment['id']}/"
        seen = _wait(
            lambda: _finished(url, token), args.timeout, "the experiment to finish", observe=lambda: _get(url, token)
        )
        rounds = _get(url + "rounds/", token)
        rounds = rounds.get("results", rounds) if isinstance(rounds, dict) else rounds
        report = {
            "status": seen["status"], "rounds": len(rounds), "devices": sorted({r["device"] for r in rounds}),
            "vram_peak_mb": [r["vram_peak_mb"] for r in rounds], "round_seconds": [r["round_seconds"] for r in rounds],
            "log": _experiment_log(env, experiment["id"]),
            "worker_log": (data / "worker.log").read_text(errors="replace").splitlines()[-5:],
        }  # fmt: skip
        print(json.dumps(report))
        on_device = all(args.device.split(":")[0] in d for d in report["devices"])
        logged = not args.expect_log or any(args.expect_log in line for line in report["log"])
        return 0 if seen["status"] == "completed" and len(rounds) == args.rounds and on_device and logged else 1
    finally:
        for proc in reversed(children):
            proc.terminate()
        for proc in children:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)


def _experiment_log(env: dict, experiment_id: int) -> list[str]:
    """The experiment's log lines, as its page shows them (level and message)."""
    code = ("from orchestrator.experiments.records import LogEntry; "
            f"[print(e.level, e.message) for e in LogEntry.objects.filter(experiment_id={experiment_id}).order_by('pk')]")  # fmt: skip
    out = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    return [line for line in out.stdout.splitlines() if line.split(" ", 1)[0] in ("info", "warning", "error")]


def _environment(data: Path, children: list) -> dict[str, str]:
    env = {**os.environ, "FEDWEB_DATA_DIR": str(data), "DEBUG": "0", "PYTHONPATH": str(ROOT)}
    env.pop("DATABASE_URL", None)  # SQLite in the data folder
    if not (env.get("REDIS_URL") and answers(env["REDIS_URL"])):
        port = free_port()
        children.append(_start([redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(data)], env, data / "redis.log"))  # fmt: skip
        env["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
        _wait(lambda: answers(env["REDIS_URL"]), 30, "the embedded Redis")
    return env


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _wait(predicate, timeout: float, what: str, observe=None):
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    seen = observe() if observe else value
    raise TimeoutError(f"waited {timeout:.0f} s for {what}; last seen: {json.dumps(seen, default=str)[:2000]}")


def _finished(url: str, token: str) -> dict | None:
    experiment = _get(url, token)
    return experiment if experiment["status"] in ("completed", "failed", "cancelled") else None


def _answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def _request(url: str, token: str | None, body: dict | None = None):
    headers = {"Content-Type": "application/json"} | ({"Authorization": f"Token {token}"} if token else {})
    data = json.dumps(body).encode() if body is not None else None
    with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=30) as response:
        return json.loads(response.read())


def _get(url: str, token: str):
    return _request(url, token)


def _post(url: str, body: dict, token: str | None = None):
    return _request(url, token, body)


if __name__ == "__main__":
    sys.exit(main())
