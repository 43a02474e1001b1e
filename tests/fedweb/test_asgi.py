"""The ASGI application daphne serves: Django's chain in one thread per request, start-up objects
out of the collector's sight. (Requests through it: tests/external/test_asgi_ingest.py.)"""

import gc
import os
import subprocess
import sys

from asgiref.sync import iscoroutinefunction

from fedweb.asgi import OneThreadASGIHandler
from tests.test_layers import ROOT


def test_it_runs_the_middleware_chain_in_sync_mode():
    # One hand-over to a thread per request, not two per middleware.
    assert not iscoroutinefunction(OneThreadASGIHandler()._middleware_chain)


def test_it_freezes_what_start_up_made(tmp_path):
    probe = "import gc, fedweb.asgi; print(gc.get_freeze_count())"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "fedweb.settings", "FEDWEB_DATA_DIR": str(tmp_path)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip().splitlines()[-1]) > 10_000  # Django's modules and classes at least
    assert gc.isenabled()  # freezing is not disabling: what requests make is still collected
