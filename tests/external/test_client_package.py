"""The client package stays light: ``import fedweb_client`` loads neither Django, torch nor flwr
(only ``fedweb_client.flower`` needs flwr)."""

import subprocess
import sys

from tests.external.conftest import CLIENT_SRC


def test_importing_the_client_loads_no_heavy_package():
    probe = "import sys, fedweb_client; print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'torch', 'flwr', 'numpy', 'requests'}))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={"PYTHONPATH": CLIENT_SRC}, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
