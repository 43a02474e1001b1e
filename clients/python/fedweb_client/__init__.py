"""Log a run from any Python script to FedWeb (standard library only).

    import fedweb_client
    run = fedweb_client.init(url="http://fedweb:8000", token="<API token>", name="my run", config={"lr": 0.1})
    for r in range(1, 101):
        ...
        run.log(r, {"loss": loss, "accuracy": acc, "grad/norm": g})
    run.finish()

``log`` only puts the round on a bounded queue: a background thread sends batches, retries with
backoff while the server is slow or away, and writes what it could not send to a local JSONL file
that ``python -m fedweb_client sync FILE`` uploads later. Nothing here raises into the training loop.

Rounds that already ran (FedWeb's engine in a notebook) go up in one call:
``fedweb_client.report(url, token, name, results, config=spec.to_dict())``.
``fedweb_client.runs(query, columns)`` reads the runs table (filtered, sorted, grouped) as rows.
"""

from __future__ import annotations

from fedweb_client.results import report
from fedweb_client.run import Run, init
from fedweb_client.runs import QueryError, runs
from fedweb_client.sync import sync

__all__ = ["QueryError", "Run", "init", "report", "runs", "sync"]
