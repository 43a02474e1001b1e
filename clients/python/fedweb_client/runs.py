"""The runs table from a script, as ``wandb.Api().runs(filters=...)`` users script theirs:

    import fedweb_client
    rows = fedweb_client.runs("local.lr > 0.05 and tag:baseline", ["local.lr", "best_accuracy", "rounds_to_target"],
                              url="http://fedweb:8000", token="<API token>", sort="-best_accuracy")
    for row in rows:
        print(row["id"], row["name"], row["local.lr"], row["best_accuracy"])

The query, the columns, the sort, the grouping and the target accuracy mean what they mean on the
runs table's page (``docs/runs.md``); ``url`` and ``token`` default to ``$FEDWEB_URL`` and
``$FEDWEB_TOKEN``. Each row is a flat dict (``pandas.DataFrame(rows)`` makes the table): a run's
id, name, status, owner and created time, then its columns; grouped, a group's key columns, its run
and completed counts, then each numeric column's ``"<name> mean"``, ``"<name> std"``. A query the
server refuses raises ``QueryError`` with its message (which names the parameter, the field or the
operator at fault, and the nearest known name).
"""

from __future__ import annotations

import os
from urllib.parse import urlencode

from fedweb_client import http

RUN_FIELDS = ("id", "name", "status", "owner", "created")


class QueryError(ValueError):
    """The server refused the table's parameters: ``errors`` maps each parameter to its messages."""

    def __init__(self, errors: dict):
        self.errors = errors
        super().__init__("; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in errors.items()))


def runs(
    query: str = "", columns=(), *, url: str | None = None, token: str | None = None, sort: str = "", group=(),
    target: float | None = None, scope: str = "", limit: int | None = None, page_size: int = 200, timeout: float = 30.0,
) -> list[dict]:  # fmt: skip
    """Every row of the table (or the first ``limit``), fetched a page at a time."""
    base = (url or os.environ.get("FEDWEB_URL") or "").rstrip("/")
    token = token or os.environ.get("FEDWEB_TOKEN") or ""
    if not base or not token:
        raise ValueError("runs() needs url= and token= (or $FEDWEB_URL and $FEDWEB_TOKEN)")
    params = {"q": query, "columns": ",".join(columns), "sort": sort, "group": ",".join(group), "scope": scope}
    if target is not None:
        params["target"] = str(target)
    params = {k: v for k, v in params.items() if v}
    rows: list[dict] = []
    page = 1
    while limit is None or len(rows) < limit:
        answer = _get(
            f"{base}/api/experiments/?{urlencode({**params, 'page': page, 'page_size': page_size})}", token, timeout
        )
        rows += [_row(r, answer) for r in answer["results"]]
        if page * page_size >= answer["count"] or not answer["results"]:
            break
        page += 1
    return rows if limit is None else rows[:limit]


def _get(address: str, token: str, timeout: float) -> dict:
    try:
        return http.get(address, f"Token {token}", timeout)
    except http.Refused as e:
        if e.status == 400 and isinstance(e.body, dict):
            raise QueryError(e.body) from None
        raise


def _row(result: dict, answer: dict) -> dict:
    if answer["group"]:
        stats = {f"{name} {k}": v[k] for name, v in result["values"].items() for k in ("mean", "std")}
        return {**result["key"], "runs": result["runs"], "completed": result["completed"], **stats}
    return {**{k: result.get(k) for k in RUN_FIELDS}, **result["values"]}
