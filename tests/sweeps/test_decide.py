"""A search's decisions (Optuna's pruners on a study rebuilt from records) against rankings computed
by hand: ASHA's top ⌊n/η⌋ of a rung with ties, promotions, a configuration that improves after a
bad rung, lower-is-better metrics, median stopping, and TPE's suggestions within their ranges."""

from __future__ import annotations

import math

import pytest

from orchestrator.sweeps.decide import Record, Rule, best, decision_rounds, promotable, rank, should_stop, suggest

ASHA = Rule("asha", first_rung=1, eta=3, direction="maximize", total=27)


def _at(step: int, values: list[float | None], state: str = "stopped") -> list[Record]:
    return [Record(i, state, {step: v}) for i, v in enumerate(values)]


def test_it_puts_the_rungs_at_r_times_powers_of_eta_below_the_runs_length():
    assert decision_rounds(ASHA) == [1, 3, 9]
    assert decision_rounds(Rule("asha", 3, 3, "maximize", 27)) == [3, 9]
    assert decision_rounds(Rule("asha", 2, 2, "maximize", 17)) == [2, 4, 8, 16]
    assert decision_rounds(Rule("median", 3, 3, "maximize", 12)) == [3, 6, 9]
    assert decision_rounds(Rule("none", 3, 3, "maximize", 12)) == []


def test_it_stops_every_configuration_until_eta_have_reached_the_rung():
    # n = 1 and 2 < η = 3: top ⌊n/3⌋ = 0 configurations continue, however good.
    assert should_stop(ASHA, [], Record(0, "running", {1: 0.99}), 1)
    assert should_stop(ASHA, _at(1, [0.1]), Record(1, "running", {1: 0.99}), 1)
    # The third: n = 3, top 1 -> the best of the three continues, the others do not.
    assert not should_stop(ASHA, _at(1, [0.5, 0.4]), Record(2, "running", {1: 0.6}), 1)
    assert should_stop(ASHA, _at(1, [0.5, 0.6]), Record(2, "running", {1: 0.4}), 1)


def test_it_keeps_the_top_third_of_a_rung_and_every_tie_at_the_cut_off():
    # Nine values at rung 1, top ⌊9/3⌋ = 3: by hand, 0.9 0.8 0.7 | 0.6 ...; the cut-off is 0.7.
    others = _at(1, [0.9, 0.8, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1])
    assert not should_stop(ASHA, others, Record(9, "running", {1: 0.7}), 1)
    # 0.55 instead: 0.9 0.8 0.6 | 0.55 ...: 4th of 9, out.
    assert should_stop(ASHA, others, Record(9, "running", {1: 0.55}), 1)
    # Ties: 0.8 0.8 0.8 0.8 and five lower; the top 3 ends inside the tie, so all four 0.8s continue.
    tied = _at(1, [0.8, 0.8, 0.8, 0.5, 0.4, 0.3, 0.2, 0.1])
    assert not should_stop(ASHA, tied, Record(9, "running", {1: 0.8}), 1)
    assert rank([*tied, Record(9, "running", {1: 0.8})], 9, 1, "maximize") == (1, 9)
    # 0.5 ties with the other 0.5 behind three 0.8s: both 4th.
    assert rank([*tied, Record(9, "running", {1: 0.5})], 9, 1, "maximize") == (4, 9)


def test_a_lower_is_better_metric_keeps_the_smallest_values():
    loss = Rule("asha", 1, 3, "minimize", 27)
    others = _at(1, [0.2, 0.3, 0.9, 1.2, 1.5])  # with a sixth, top ⌊6/3⌋ = 2: 0.2 and the better of 0.3 / it
    assert not should_stop(loss, others, Record(9, "running", {1: 0.25}), 1)
    assert should_stop(loss, others, Record(9, "running", {1: 0.35}), 1)
    assert rank([*others, Record(9, "running", {1: 0.25})], 9, 1, "minimize") == (2, 6)
    assert best([Record(0, "completed", {}, value=0.4), Record(1, "completed", {}, value=0.1)], "minimize").number == 1


def test_a_configuration_stopped_at_a_rung_is_promoted_once_it_ranks_in():
    # 0.5 came first (n = 1: stopped). Two more arrive below it: n = 3, top 1 is 0.5 -> promotable.
    first = Record(0, "stopped", {1: 0.5})
    assert not promotable(ASHA, [first, *_at(1, [None, 0.4])[1:]], first, 1)  # n = 2: not yet
    later = [first, Record(1, "stopped", {1: 0.4}), Record(2, "stopped", {1: 0.3})]
    assert promotable(ASHA, later, first, 1)
    assert not promotable(ASHA, later, later[1], 1)
    assert not promotable(Rule("median", 1, 3, "maximize", 27), later, first, 1)  # median never promotes


def test_a_configuration_that_improves_after_a_bad_rung_is_still_stopped_at_that_rung():
    # Its later rounds would be the best of all, but at rung 3 it ranks 3rd of 3 (top 1 continues):
    # the rule judges the value at the rung, and nothing after it.
    others = [Record(0, "running", {1: 0.7, 3: 0.8}), Record(1, "stopped", {1: 0.6, 3: 0.75})]
    late_bloomer = Record(2, "running", {1: 0.65, 3: 0.70, 9: 0.99})
    assert should_stop(ASHA, others, late_bloomer, 3)
    assert rank([*others, late_bloomer], 2, 3, "maximize") == (3, 3)


def test_no_value_at_the_rung_is_a_stop_and_ranks_last():
    assert should_stop(ASHA, _at(1, [0.5, 0.4, 0.3]), Record(9, "running", {1: None}), 1)
    # A configuration without a value counts as the worst competitor, not as NaN in the sort.
    assert not should_stop(ASHA, _at(1, [None, None]), Record(9, "running", {1: 0.1}), 1)
    assert rank([*_at(1, [None, 0.2]), Record(9, "running", {1: 0.1})], 9, 1, "maximize") == (2, 3)


def test_median_stopping_compares_the_best_so_far_with_the_median_of_completed_configurations():
    rule = Rule("median", 2, 3, "minimize", 10)
    done = [Record(i, "completed", {2: v, 4: v - 0.1}, value=v - 0.3) for i, v in enumerate([1.0, 1.2, 1.4, 1.6, 1.8])]
    # The median at round 2 is 1.4 (lower is better): 1.5 stops, 1.3 goes on.
    assert should_stop(rule, done, Record(7, "running", {2: 1.5}), 2)
    assert not should_stop(rule, done, Record(7, "running", {2: 1.3}), 2)
    # At round 4 it is judged on its best value so far (1.25, at round 2) against the median there
    # (about 1.3): a worse round 4 alone does not stop it.
    assert not should_stop(rule, done, Record(7, "running", {2: 1.25, 4: 1.9}), 4)
    assert should_stop(rule, done, Record(7, "running", {2: 1.35, 4: 1.9}), 4)
    # Fewer than 5 completed configurations: nothing is stopped yet (Optuna's default start-up).
    assert not should_stop(rule, done[:4], Record(7, "running", {2: 9.0}), 2)


def test_tpe_suggests_values_inside_its_ranges_and_differs_between_trials():
    ranges = {
        "local.lr": {"type": "float", "low": 1e-3, "high": 0.5, "log": True},
        "local.epochs": {"type": "int", "low": 1, "high": 3, "log": False},
        "algorithm.name": {"type": "choice", "choices": ["fedavg", "fedadam"]},
    }
    history: list[Record] = []
    for number in range(6):
        params = suggest(ranges, history, direction="maximize", seed=0, budget=6)
        assert 1e-3 <= params["local.lr"] <= 0.5 and params["local.epochs"] in (1, 2, 3)
        assert params["algorithm.name"] in ("fedavg", "fedadam")
        history.append(Record(number, "completed", {}, value=-abs(math.log10(params["local.lr"]) + 1), params=params))
    assert len({h.params["local.lr"] for h in history}) == 6
    # The same history and seed give the same suggestion: the search is reproducible.
    assert suggest(ranges, history, direction="maximize", seed=0, budget=6) == suggest(
        ranges, history, direction="maximize", seed=0, budget=6
    )


@pytest.mark.parametrize("direction", ["maximize", "minimize"])
def test_a_single_trial_is_ranked_first_of_one(direction):
    assert rank([Record(0, "running", {3: 0.5})], 0, 3, direction) == (1, 1)
