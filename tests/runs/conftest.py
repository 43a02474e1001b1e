"""Fixtures of the runs-table tests: a signed-in client, and two teams with their runs (world.py)."""

from tests.runs.world import runs  # noqa: F401
from tests.web.conftest import alice_client  # noqa: F401
