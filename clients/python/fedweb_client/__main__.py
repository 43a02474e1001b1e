"""``python -m fedweb_client sync FILE [--token T] [--url U]``: upload a run's local journal."""

from __future__ import annotations

import argparse
import os
import sys

from fedweb_client import http
from fedweb_client.sync import sync


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fedweb_client")
    commands = parser.add_subparsers(dest="command", required=True)
    cmd = commands.add_parser("sync", help="upload a run's JSONL journal")
    cmd.add_argument("file")
    cmd.add_argument("--token", default=os.environ.get("FEDWEB_TOKEN"), help="user API token (default $FEDWEB_TOKEN)")
    cmd.add_argument("--url", help="the FedWeb server (default: the one in the file)")
    args = parser.parse_args(argv)
    try:
        result = sync(args.file, token=args.token, url=args.url)
    except (OSError, ValueError, http.ServerAway, http.Refused) as e:
        print(f"fedweb_client sync: {e}", file=sys.stderr)
        return 1
    print(f"run {result['id']}: {result['sent']} rounds sent, {result['duplicates']} already there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
