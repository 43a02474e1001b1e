"""Report rounds that already ran (FedWeb's engine in a notebook, any list of per-round dicts) as
one external run, in one call::

    results = Simulation(spec).run()
    run = fedweb_client.report("http://fedweb:8000", token, "digits, α = 0.5", results, config=spec.to_dict())

Each round's numbers are sent under their own names, so the engine's RoundResult fields (train_loss,
test_accuracy, bytes_up, rss_mb, …) fill the same charts a round run by FedWeb does; what is not a
number (the device's name, histograms, a null on a round without evaluation) is left out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from fedweb_client.run import Run, init


def report(
    url: str, token: str, name: str, results: Iterable[Any], *, config: dict | None = None, timeout: float = 60.0,
    **options: Any,
) -> Run:  # fmt: skip
    """Create a run named ``name`` on the FedWeb at ``url`` (a user's API ``token``), send every
    round of ``results`` (objects with ``to_dict()``, such as the engine's RoundResult, or mappings
    with a ``round`` key) and finish it, waiting up to ``timeout`` seconds. Returns the
    :class:`Run`: ``run.dashboard`` is its page; ``run.sent`` the rounds the server has. Like
    ``init``, it never raises for a server that is away: what was not sent is in ``run.journal.path``
    for ``python -m fedweb_client sync``. ``options``: those of ``init`` (team, tags, visibility, …)."""
    rounds = [_values(r) for r in results]
    run = init(url, token, name, config=config, total_rounds=len(rounds), **options)
    for values in rounds:
        run.log(values["round"], _numbers(values))
    run.finish(timeout)
    return run


def _values(result: Any) -> Mapping[str, Any]:
    values = result.to_dict() if hasattr(result, "to_dict") else result
    if not isinstance(values, Mapping) or not isinstance(values.get("round"), int):
        raise TypeError(f"a result must be a RoundResult or a mapping with an integer 'round', not {result!r}")
    return values


def _numbers(values: Mapping[str, Any]) -> dict[str, float | int]:
    """The round's finite numbers, the round's own number aside."""
    return {
        key: value
        for key, value in values.items()
        if key != "round" and isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    }
