"""The sweep table's numbers (orchestrator/sweeps/stats.py): each declared run summary, pooled over the
seeds of a configuration as mean ± std."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fedweb_engine.results import round_fields
from orchestrator.sweeps.stats import group
from tests.factories import round_result


def _run(pk: int, seed: int, status: str = "completed") -> SimpleNamespace:
    return SimpleNamespace(pk=pk, spec={"seed": seed, "local": {"lr": 0.1}}, status=status,
                           is_finished=status in ("completed", "cancelled", "failed"))  # fmt: skip


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


def test_it_pools_only_the_completed_runs_and_says_how_many():
    # 1 of 2 seeds done: the running one's 6 rounds so far are no result ("Rounds 6 ± 6" was).
    runs = [_run(1, 0), _run(2, 1, status="running")]
    rounds = {1: [round_result(n, test_accuracy=0.1 * n) for n in range(1, 13)], 2: [round_result(1)]}

    [row] = group(runs, rounds, ["local.lr"])

    assert (row["finished"], row["counted"]) == (1, 1)
    assert row["rounds"] == (12, 0.0) and row["final_accuracy"] == pytest.approx((1.2, 0.0))
    assert row["seconds"] == pytest.approx((6.0, 0.0))


def test_a_configuration_with_no_completed_run_has_no_statistics_yet():
    [row] = group([_run(1, 0, status="running")], {1: [round_result(1)]}, ["local.lr"])

    assert row["counted"] == 0 and row["rounds"] == (None, None) and row["final_accuracy"] == (None, None)
