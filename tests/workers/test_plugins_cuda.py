"""The Celery parent imports plugins before it forks its pool: a plugin must not be able to
initialise CUDA there (every forked child would fail with "Cannot re-initialize CUDA in forked
subprocess"). Checked in a fresh interpreter that imports the Celery app as ``celery worker`` does."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import os, torch; from fedweb.celery import app; app.loader.import_default_modules(); "
    "print(torch.cuda.is_initialized(), os.environ['CUDA_DEVICE_ORDER'])"
)


def _import_the_worker_app(**env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "FEDWEB_PLUGINS": "tests.workers.cuda_plugin", **env}
    environ.pop("CUDA_DEVICE_ORDER", None)
    return subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=environ, capture_output=True, text=True)


def test_a_plugin_asking_for_cuda_at_import_leaves_the_parent_uninitialised():
    done = _import_the_worker_app()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "PCI_BUS_ID"]


def test_a_plugin_initialising_cuda_at_import_stops_the_worker_naming_it():
    done = _import_the_worker_app(FEDWEB_TEST_PLUGIN_CUDA="init")
    assert done.returncode != 0
    assert "module 'tests.workers.cuda_plugin' failed to import" in done.stderr
    assert "initialises CUDA when imported" in done.stderr
