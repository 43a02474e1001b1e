"""The client package stays light: ``import fedweb_client`` loads neither Django, torch nor flwr
(only ``fedweb_client.flower`` needs flwr)."""

import shutil
import subprocess
import sys
from pathlib import Path

from tests.external.conftest import CLIENT_SRC


def test_importing_the_client_loads_no_heavy_package():
    probe = "import sys, fedweb_client; print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'torch', 'flwr', 'numpy', 'requests'}))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={"PYTHONPATH": CLIENT_SRC}, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_installing_the_client_leaves_nothing_untracked_in_the_checkout(tmp_path):
    # What a user runs (pip install ./clients/python) builds in the source tree: build/ and the
    # .egg-info must not show up as changes to commit.
    package = Path(CLIENT_SRC)
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
               "--target", str(tmp_path / "site"), str(package)]  # fmt: skip
    out = subprocess.run(install, capture_output=True, text=True, timeout=300)
    try:
        assert out.returncode == 0, out.stderr
        built = [p.name for p in package.iterdir() if p.name == "build" or p.name.endswith(".egg-info")]
        assert built, "pip built nothing in the source tree: this test no longer tests anything"
        status = subprocess.run(["git", "status", "--porcelain", "--", str(package)], capture_output=True, text=True)
        assert status.stdout == ""
    finally:
        for leftover in [package / "build", *package.glob("*.egg-info")]:
            shutil.rmtree(leftover, ignore_errors=True)
