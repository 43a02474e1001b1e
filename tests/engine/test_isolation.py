import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_it_imports_no_web_framework():
    code = (
        "import sys, workers.engine, workers.engine.runner, workers.engine.__main__\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'celery', 'channels', 'kombu', 'daphne'))\n"
        "print(','.join(bad))\n"
    )

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)

    assert out.stdout.strip() == ""
