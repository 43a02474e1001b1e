"""A green run cannot hide a skipped broker: the terminal summary names tests skipped for a missing service."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedweb.localredis import free_port

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_it_names_the_tests_skipped_for_a_missing_rabbitmq():
    dead = f"amqp://guest:guest@127.0.0.1:{free_port()}//"  # nothing listens there
    env = {**os.environ, "RABBITMQ_URL": dead}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/web/test_views.py", "-k", "real_rabbitmq", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:]
    line = (
        "skipped for a missing service: RabbitMQ (1): tests/web/test_views.py::test_it_reports_a_real_rabbitmq_broker"
    )
    assert line in proc.stdout, proc.stdout[-3000:]
