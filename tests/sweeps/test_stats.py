"""The sweep table's numbers (orchestrator/sweeps/stats.py): each declared run summary, pooled over the
seeds of a configuration as mean ± std."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fedweb_engine.results import round_fields
from orchestrator.sweeps.stats import group
from tests.factories import round_result


def _run(pk: int, seed: int) -> SimpleNamespace:
    return SimpleNamespace(pk=pk, spec={"seed": seed, "local": {"lr": 0.1}}, is_finished=True)


def test_it_pools_every_declared_run_summary_over_the_seeds():
    runs = [_run(1, 0), _run(2, 1), _run(3, 2)]
    filled = {f.name: 0.5 for f in round_fields.FIELDS if f.null and f.type is float}
    rounds = {
        1: [round_result(1, **{**filled, "test_loss": 0.9}), round_result(2, **{**filled, "test_loss": 0.6})],
        2: [round_result(1, **{**filled, "test_loss": 0.8})],
        3: [],  # not started: no value, not a zero
    }
    [row] = group(runs, rounds, ["local.lr"])
    # Read from the declaration: a Summary declared in round_fields.py that the table left out fails here.
    for _, summary in round_fields.summaries():
        mean, std = row[summary.key]
        assert mean is not None and std is not None, summary.key
    assert row["final_loss"] == pytest.approx((0.7, 0.1 * 2**0.5))  # runs 1 and 2: 0.6 and 0.8
    assert row["best_loss"] == pytest.approx((0.7, 0.1 * 2**0.5))
    assert row["rounds"] == pytest.approx((1.5, 0.5**0.5))
    assert row["label"] == "lr=0.1" and row["seeds"] == [0, 1, 2]
