"""The engine's imports: no web framework anywhere in it, and no module that needs another imported first."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Every module of fedweb_engine, found on disk, so a new file is covered without editing this list.
ENGINE_MODULES = (
    "import pkgutil, fedweb_engine as engine\n"
    "names = [m.name for m in pkgutil.walk_packages(engine.__path__, 'fedweb_engine.')]\n"
)


def _python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_it_imports_no_web_framework():
    code = ENGINE_MODULES + (
        "import importlib, sys\n"
        "for name in names: importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery', 'channels', 'kombu', 'daphne'))\n"
        "print(len(names)); print(','.join(bad))\n"
    )

    count, _, bad = _python(code).partition("\n")

    assert int(count) > 40  # the walk found the engine's modules
    assert bad == ""


def test_it_imports_each_engine_module_first_without_a_cycle():
    # A loop between two modules fails only when one particular module is imported first, so each
    # one starts from an empty slate (torch stays loaded: it is not ours, and reloading it is slow).
    code = ENGINE_MODULES + (
        "import importlib, sys\n"
        "import numpy, torch\n"
        "failed = []\n"
        "for name in names:\n"
        "    for loaded in [m for m in sys.modules if m == 'workers' or m.startswith('workers.')]:\n"
        "        del sys.modules[loaded]\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception as e:\n"
        "        failed.append(f'{name}: {type(e).__name__}: {e}')\n"
        "print('\\n'.join(failed))\n"
    )

    assert _python(code) == ""
