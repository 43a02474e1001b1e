"""The Python client's cost in the training loop: microseconds per ``run.log`` call.

``run.log`` only queues the round; a background thread sends it. This measures what the training
loop pays, with the sending thread busy beside it, in two settings: a local stub server that takes
every batch (the thread sends all the time) and a server that is away (the thread retries with
backoff). The baseline is the strongest simple one: appending the same ``(round, dict(metrics))`` to
a list, which is what any logger must at least do. Each repeat logs ``calls`` rounds of 10 metrics;
the figure is the median over repeats of the mean per call. Target (issue 20): < 50 µs per log.

    python -m benchmarks client_log --size small     # 5 repeats of 20,000 calls
    python -m benchmarks client_log --size full      # 15 repeats of 100,000 calls
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from benchmarks.common import Options

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))
import fedweb_client  # noqa: E402 - the client is its own package (clients/python), not installed here

SIZES = {"small": {"repeats": 5, "calls": 20_000}, "full": {"repeats": 15, "calls": 100_000}}
TARGET_US = 50.0


class _Stub(BaseHTTPRequestHandler):
    """Answers create and rounds like FedWeb does (201 with the shapes the client reads)."""

    def do_POST(self):  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path.endswith("/runs/"):
            answer = {"id": 1, "token": "frt_stub", "dashboard": ""}
        else:
            answer = {"recorded": [r["round"] for r in body.get("rounds", [])], "duplicates": []}
        data = json.dumps(answer).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def _metrics(r: int) -> dict:
    return {f"m{i}": r * 0.001 + i for i in range(10)}


class _ListLogger:
    """The baseline: keep each round in a list (what any logger must at least do)."""

    def __init__(self):
        self.rounds: list = []

    def log(self, round_number: int, metrics: dict) -> None:
        self.rounds.append((round_number, dict(metrics)))


def _per_call_us(log, calls: int) -> float:
    metrics = [_metrics(r) for r in range(calls)]  # built outside the timed loop, like a model's outputs
    start = time.perf_counter()
    for r in range(calls):
        log(r + 1, metrics[r])
    return (time.perf_counter() - start) / calls * 1e6


def _client_run(url: str, calls: int, journal: Path) -> float:
    run = fedweb_client.init(url=url, token="t", name="bench", journal=journal, max_queue=calls + 10)
    try:
        return _per_call_us(run.log, calls)
    finally:
        if not run.finish(timeout=0.5):
            run._finished.wait(60)  # the rest goes to the journal: let it land before the folder goes


def run(opts: Options) -> dict[str, Any]:
    size = SIZES[opts.size]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    live_url = f"http://127.0.0.1:{server.server_address[1]}"
    away_url = "http://127.0.0.1:9"  # the discard port: nothing listens there
    samples: dict[str, list[float]] = {"list_append": [], "client_server_up": [], "client_server_away": []}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for i in range(size["repeats"]):
            samples["list_append"].append(_per_call_us(_ListLogger().log, size["calls"]))
            samples["client_server_up"].append(_client_run(live_url, size["calls"], Path(folder) / f"up{i}.jsonl"))
            samples["client_server_away"].append(_client_run(away_url, size["calls"], Path(folder) / f"away{i}.jsonl"))
    server.shutdown()
    medians = {name: statistics.median(values) for name, values in samples.items()}
    worst = max(medians["client_server_up"], medians["client_server_away"])
    return {
        "device": "cpu",
        "precision": opts.precision,
        "python": platform.python_version(),
        "wall_seconds": time.perf_counter() - started,
        "repeats": size["repeats"],
        "calls_per_repeat": size["calls"],
        "metrics_per_call": 10,
        "per_log_us_median": medians,
        "per_log_us_samples": samples,
        "target_us": TARGET_US,
        "meets_target": worst < TARGET_US,
        "anchor": "list_append",
        "anchor_ratio": worst / medians["list_append"],
        "anchor_summary": f"client {worst:.2f} us/log (worst case) vs list.append {medians['list_append']:.2f} us",
        **dict.fromkeys(("rounds_per_hour", "samples_per_s", "achieved_tflops", "peak_tflops", "peak_fraction")),
        **dict.fromkeys(("peak_vram_mb", "peak_rss_mb")),
    }
