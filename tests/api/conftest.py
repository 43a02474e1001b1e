from tests.accounts.world import fast_password_hashing  # noqa: F401  (autouse)
from tests.runs.world import runs  # noqa: F401  (two teams and their runs: tests/api/test_runs_api.py)
