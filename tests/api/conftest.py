from tests.accounts.world import fast_password_hashing  # noqa: F401  (autouse)
