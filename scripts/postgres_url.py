"""Print the URL of a PostgreSQL for the ``postgres``-marked tests: $DATABASE_URL when it is one,
else postgres://postgres@127.0.0.1:5432/test when that answers, else nothing (``make test`` then
runs those tests on SQLite and says so). Each test run creates its own uniquely named database there.
"""

import os
import sys


def answers(url: str) -> bool:
    try:
        import psycopg  # optional: without the driver there is no PostgreSQL to test on
    except ImportError:
        return False
    try:
        with psycopg.connect(url.replace("postgres://", "postgresql://", 1), connect_timeout=2):
            return True
    except Exception:
        return False


def main() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        print(url)
        return
    local = os.environ.get("FEDWEB_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test")
    if answers(local):
        print(local)


if __name__ == "__main__":
    sys.exit(main())
