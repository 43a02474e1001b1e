"""The web process's start-up time and memory, and whether it loads torch.

Each run is a fresh ``python`` that imports ``fedweb.asgi`` (what daphne loads: Django set up, the
plugins and the engine's spec and registry loaded, ``gc.freeze``), then serves the new-experiment
page and ``GET /api/experiments/`` through the ASGI application, then the page's resources estimate
twice (a model built on the meta device: in process when torch is loaded there, else by the
estimates helper, whose start-up the first one pays). It reports seconds from the process's start
to ready, the import alone, RSS after start-up and after serving, the objects ``gc.freeze`` froze,
and the estimate's latency, first and second. With ``FEDWEB_BENCH_BEFORE=/path/to/an/older/tree``
the same runs alternate with that tree's code (same database, same interpreter), so both see the
same load; the record keeps every run and the medians.

    python -m benchmarks web_startup --size small    # 5 runs per tree
    python -m benchmarks web_startup --size full     # 11 runs per tree
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import Options

ROOT = Path(__file__).resolve().parents[1]
RUNS = {"small": 5, "full": 11}

PROBE = r"""
import asyncio, gc, json, os, sys, time
from urllib.parse import urlencode
import psutil

started = psutil.Process().create_time()
t0 = time.perf_counter()
from fedweb.asgi import application
import_s = time.perf_counter() - t0
ready_s = time.time() - started


def rss_mb(pid=None):
    return psutil.Process(pid).memory_info().rss / 2**20


out = {"ready_s": ready_s, "import_s": import_s, "rss_start_mb": rss_mb(), "frozen_objects": gc.get_freeze_count(),
       "modules": len(sys.modules), "torch_at_start": "torch" in sys.modules}
from channels.testing import HttpCommunicator
from orchestrator.web.forms.experiment_forms import spec_initial

session, token = sys.argv[1], sys.argv[2]
user = [(b"host", b"localhost"), (b"cookie", f"sessionid={session}".encode())]
api = [(b"host", b"localhost"), (b"authorization", f"Token {token}".encode())]
form = {k: ("on" if v is True else str(v)) for k, v in spec_initial({"compute": {"device": "cpu"}}).items()
        if v is not False and v is not None}


async def get(path, headers):
    began = time.perf_counter()
    answer = await HttpCommunicator(application, "GET", path, headers=headers).get_response(timeout=600)
    assert answer["status"] == 200, (path, answer["status"], answer["body"][:300])
    return time.perf_counter() - began


async def main():
    out["page_s"] = await get("/experiments/new/", user)
    out["api_s"] = await get("/api/experiments/", api)
    out["rss_served_mb"] = rss_mb()
    out["estimate_first_s"] = await get("/experiments/new/resources.json?" + urlencode(form), user)
    out["estimate_second_s"] = await get("/experiments/new/resources.json?" + urlencode(form), user)
    out["rss_estimated_mb"] = rss_mb()
    out["torch_at_end"] = "torch" in sys.modules
    try:
        from fedweb_engine.estimates.helper import _helper
        out["helper_rss_mb"] = rss_mb(_helper.pid) if _helper.pid else None
    except ImportError:  # a tree from before the helper
        out["helper_rss_mb"] = None


asyncio.run(main())
print(json.dumps(out))
"""

SETUP = r"""
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token
user = get_user_model().objects.create_user("bench", password="pw")
client = Client()
client.force_login(user)
print(client.cookies["sessionid"].value, Token.objects.create(user=user).key)
"""


def _env(db: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k not in ("FEDWEB_PLUGINS", "PYTHONPATH", "DATABASE_URL")}
    # One data folder for both trees: the same generated SECRET_KEY, so the session holds in each.
    data = {"DATABASE_URL": f"sqlite:///{db}", "FEDWEB_DATA_DIR": str(db.parent)}
    return {**keep, "DJANGO_SETTINGS_MODULE": "fedweb.settings", "OMP_NUM_THREADS": "1", **data}


def _prepare(db: Path) -> tuple[str, str]:
    """A migrated SQLite database with a user; its session cookie and API token."""
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--verbosity", "0"], cwd=ROOT, env=_env(db), check=True, timeout=900)
    done = subprocess.run([*manage, "shell", "-c", SETUP], cwd=ROOT, env=_env(db), check=True, timeout=300,
                          capture_output=True, text=True)  # fmt: skip
    session, token = done.stdout.split()[-2:]
    return session, token


def _run(tree: Path, db: Path, session: str, token: str) -> dict[str, Any]:
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, "-c", PROBE, session, token], cwd=tree, env=_env(db),
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the probe failed in {tree}: {done.stderr[-2000:]}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load_1min": load}


def _commit(tree: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True)
    return done.stdout.strip() or "?"


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and not isinstance(v, bool)]
    out: dict[str, Any] = {}
    for key in keys:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = round(statistics.median(values), 3) if values else None
    out["torch_at_start"] = sorted({r["torch_at_start"] for r in runs})
    out["torch_at_end"] = sorted({r["torch_at_end"] for r in runs})
    return out


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def run(opts: Options) -> dict[str, Any]:
    before = os.environ.get("FEDWEB_BENCH_BEFORE")
    trees = {"after": ROOT, **({"before": Path(before).resolve()} if before else {})}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite3"
        session, token = _prepare(db)
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(RUNS[opts.size]):
            for name, tree in sorted(trees.items()):  # alternated: both see the same load
                runs[name].append(_run(tree, db, session, token))
    medians = {name: _medians(r) for name, r in runs.items()}
    record: dict[str, Any] = {
        "device": "cpu (web processes)",
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "commits": {name: _commit(tree) for name, tree in trees.items()},
        "medians": medians,
        "runs": runs,
        "wall_seconds": sum(r["ready_s"] + r["page_s"] + r["api_s"] for rs in runs.values() for r in rs),
        "peak_rss_mb": max(r["rss_estimated_mb"] for rs in runs.values() for r in rs),
    }
    if "before" in medians:
        b, a = medians["before"], medians["after"]
        record["summary"] = (
            f"web process ready in {a['ready_s']:.2f} s (was {b['ready_s']:.2f} s), RSS after start-up "
            f"{a['rss_start_mb']:.0f} MB (was {b['rss_start_mb']:.0f} MB), after serving {a['rss_served_mb']:.0f} MB "
            f"(was {b['rss_served_mb']:.0f} MB); objects frozen {a['frozen_objects']:.0f} (was {b['frozen_objects']:.0f}); "
            f"first estimate {a['estimate_first_s']:.2f} s (was {b['estimate_first_s']:.2f} s), then "
            f"{a['estimate_second_s']:.3f} s (was {b['estimate_second_s']:.3f} s)"
        )
    return record
