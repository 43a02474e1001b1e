"""Fixtures of the experiment tests: a signed-in client (the pages that show what a run keeps)."""

from tests.web.conftest import alice_client  # noqa: F401
