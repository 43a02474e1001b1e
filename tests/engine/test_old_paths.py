"""The engine's old home, ``workers.engine``, still imports for one release (plugins written against
it keep working), with a DeprecationWarning naming the new path, and gives the very same modules."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import warnings
warnings.simplefilter("error", DeprecationWarning)
try:
    from workers.engine import registry
except DeprecationWarning as w:
    print("warned:", w)
warnings.simplefilter("ignore", DeprecationWarning)
from workers.engine import registry as old
from workers.engine.spec import Spec as OldSpec
from fedweb_engine.components import registry as new
from fedweb_engine import Spec
print(old is new, OldSpec is Spec)
"""


def test_the_old_import_paths_warn_and_give_the_same_modules():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "warned: workers.engine moved to fedweb_engine" in out.stdout
    assert out.stdout.strip().endswith("True True")  # one registry: a plugin registered either way is found


def test_the_old_command_line_still_runs():
    out = subprocess.run([sys.executable, "-m", "workers.engine", "presets"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "quickstart" in out.stdout
