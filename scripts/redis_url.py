"""Print the URL of a Redis that answers: $REDIS_URL, else 127.0.0.1:6379, else nothing.

``--test`` uses database 10 of a shared local Redis (other tools keep to the low numbers).
An empty answer tells the caller to start the embedded one.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedweb.localredis import answers  # noqa: E402


def main() -> None:
    url = os.environ.get("REDIS_URL")
    if url:
        print(url)
        return
    local = "redis://127.0.0.1:6379/" + ("10" if "--test" in sys.argv else "0")
    if answers(local):
        print(local)


if __name__ == "__main__":
    main()
