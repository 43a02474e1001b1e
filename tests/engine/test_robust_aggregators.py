"""The robust rules (median, trimmed mean, Krum) against results computed by hand on small tensors,
and the strategies as the registry builds them."""

import math

import pytest
import torch

from fedweb_engine.components import registry
from fedweb_engine.spec.schema import AlgorithmSpec, SpecError
from fedweb_engine.strategies import build_strategy, needs_updates, robust
from fedweb_engine.strategies.robust import coordinate_median, krum, trimmed_count, trimmed_mean

# Five clients, two coordinates; the last client is an outlier in both.
FIVE = torch.tensor([[1.0, -2.0], [3.0, 0.0], [2.0, 4.0], [5.0, 1.0], [100.0, -50.0]])


def test_the_median_of_an_odd_count_is_the_middle_value_per_coordinate():
    # column 0 sorted: 1 2 3 5 100 -> 3; column 1 sorted: -50 -2 0 1 4 -> 0
    assert coordinate_median(FIVE).tolist() == [3.0, 0.0]


def test_the_median_of_an_even_count_averages_the_two_middle_values():
    four = FIVE[:4]  # column 0: 1 2 3 5 -> (2+3)/2; column 1: -2 0 1 4 -> (0+1)/2
    assert coordinate_median(four).tolist() == [2.5, 0.5]


def test_a_single_update_is_its_own_median_trimmed_mean_and_krum():
    one = torch.tensor([[1.5, -2.0, 7.0]])
    for result in (coordinate_median(one), trimmed_mean(one, 0.4), krum(one, f=1)):
        assert result.tolist() == [1.5, -2.0, 7.0]


def test_the_trimmed_mean_drops_floor_beta_n_values_from_each_end():
    # n = 5, β = 0.2 -> ⌊1.0⌋ = 1 from each end.
    # column 0: 1 [2 3 5] 100 -> 10/3; column 1: -50 [-2 0 1] 4 -> -1/3
    result = trimmed_mean(FIVE, 0.2)
    assert result.tolist() == pytest.approx([10 / 3, -1 / 3])


def test_the_trimmed_mean_rounds_beta_n_down():
    # n = 5, β = 0.39 -> ⌊1.95⌋ = 1 (not 2): same as β = 0.2
    assert torch.equal(trimmed_mean(FIVE, 0.39), trimmed_mean(FIVE, 0.2))
    # n = 5, β = 0.4 -> 2 from each end leaves the median
    assert trimmed_mean(FIVE, 0.4).tolist() == [3.0, 0.0]


def test_the_trimmed_count_is_not_fooled_by_binary_fractions():
    assert 0.29 * 100 < 29  # 28.999999999999996
    assert trimmed_count(100, 0.29) == 29
    assert trimmed_count(10, 0.1) == 1 and trimmed_count(9, 0.1) == 0 and trimmed_count(3, 0.49) == 1


def test_a_zero_beta_trimmed_mean_is_the_plain_mean():
    assert trimmed_mean(FIVE, 0.0).tolist() == pytest.approx(FIVE.mean(dim=0).tolist())


def test_the_trimmed_mean_refuses_a_beta_that_leaves_nothing():
    with pytest.raises(ValueError, match="beta must be in"):
        trimmed_mean(FIVE, 0.5)


# Krum: four honest updates on a line and one far away.
#   a=(0,0) b=(1,0) c=(2,0) d=(4,0) e=(20,20)
LINE = torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [4.0, 0.0], [20.0, 20.0]])


def test_krum_picks_the_update_closest_to_its_n_minus_f_minus_2_neighbours():
    # n = 5, f = 1 -> 2 nearest others. Squared distances:
    #   a: b 1, c 4  -> 5      b: a 1, c 1 -> 2      c: b 1, a 4 -> 5
    #   d: c 4, b 9  -> 13     e: far (> 500)
    assert krum(LINE, f=1).tolist() == [1.0, 0.0]  # b


def test_multi_krum_averages_the_m_best_scored_updates():
    # scores: b 2, a 5, c 5 (tie: the earlier row, a), d 13 -> m = 2: mean(b, a); m = 3: mean(b, a, c)
    assert krum(LINE, f=1, m=2).tolist() == [0.5, 0.0]
    assert krum(LINE, f=1, m=3).tolist() == [1.0, 0.0]


def test_multi_krum_caps_m_at_n_minus_f():
    # n − f = 4: the outlier e is never averaged in, however large m is.
    assert krum(LINE, f=1, m=10).tolist() == [7 / 4, 0.0]  # mean(a, b, c, d)


def test_krum_with_f_zero_scores_over_n_minus_2_neighbours():
    # 3 nearest others: a: 1+4+16=21, b: 1+1+9=11, c: 1+4+4=9, d: 4+9+16=29 -> c
    assert krum(LINE, f=0).tolist() == [2.0, 0.0]


def test_krum_falls_back_to_the_median_when_n_is_at_most_f_plus_2():
    three = LINE[[0, 1, 4]]  # n = 3, f = 1: no neighbour to score against
    assert krum(three, f=1).tolist() == coordinate_median(three).tolist() == [1.0, 0.0]
    assert krum(LINE[:2], f=0).tolist() == [0.5, 0.0]  # n = 2 = f + 2: the mean of two is their median


def test_krum_never_picks_an_update_with_nan_or_infinite_entries():
    poisoned = LINE.clone()
    poisoned[1, 0] = math.nan  # b, the best honest update, is now garbage
    poisoned[4, 1] = math.inf

    result = krum(poisoned, f=1)

    # Distances to b are NaN, to e ∞: a: c 4 + d 16 = 20, c: a 4 + d 4 = 8, d: c 4 + a 16 = 20 -> c
    assert result.tolist() == [2.0, 0.0]


def test_the_column_blocks_give_the_same_result_as_one_block(monkeypatch):
    updates = torch.randn(7, 1000, generator=torch.Generator().manual_seed(0))
    whole = (coordinate_median(updates), trimmed_mean(updates, 0.3))
    monkeypatch.setattr(robust, "BLOCK_ELEMENTS", 7 * 64 + 3)  # 64 columns a block, the last one short

    blocked = (coordinate_median(updates), trimmed_mean(updates, 0.3))

    assert all(torch.equal(a, b) for a, b in zip(whole, blocked, strict=True))


# -- the strategies, as the engine builds them -------------------------------------------------


def test_the_three_are_registered_as_strategies_that_need_every_update():
    for name in ("median", "trimmed_mean", "krum"):
        component = registry.get("strategy", name)
        assert component.builtin and component.traits["needs_updates"] and needs_updates(name)
    assert not needs_updates("fedavg")
    assert {f for f in registry.get("strategy", "krum").default_options().__dataclass_fields__} == {
        "byzantine",
        "multi",
    }


def test_a_robust_step_moves_the_model_by_server_lr_times_the_aggregate_ignoring_weights():
    strategy = build_strategy(AlgorithmSpec(name="median", server_lr=0.5), num_params=2, device="cpu")
    w = torch.tensor([10.0, 10.0])
    weights = torch.tensor([1.0, 1.0, 1.0, 1.0, 1e6])  # the outlier claims a million samples

    strategy.step(w, FIVE, weights)

    assert w.tolist() == [10.0 + 0.5 * 3.0, 10.0]


def test_options_come_from_a_mapping_validated_with_dotted_names():
    spec = AlgorithmSpec(name="trimmed_mean")
    strategy = build_strategy(spec, num_params=2, device="cpu", options={"beta": 0.4})
    w = torch.zeros(2)
    strategy.step(w, FIVE, torch.ones(5))
    assert strategy.options.beta == 0.4 and w.tolist() == [3.0, 0.0]

    with pytest.raises(SpecError, match=r"^algorithm\.options\.beta must be < 0\.5"):
        build_strategy(spec, num_params=2, device="cpu", options={"beta": 0.5})
    with pytest.raises(SpecError, match=r"^algorithm\.options\.byzantine must be >= 0"):
        build_strategy(AlgorithmSpec(name="krum"), num_params=2, device="cpu", options={"byzantine": -1})
    with pytest.raises(SpecError, match=r"^algorithm\.options\.width is not a known field"):
        build_strategy(AlgorithmSpec(name="krum"), num_params=2, device="cpu", options={"width": 3})


def test_a_robust_strategy_checkpoints_like_any_other():
    strategy = build_strategy(AlgorithmSpec(name="krum"), num_params=3, device="cpu")

    assert strategy.state_dict() == {}
    strategy.load_state_dict({})  # stateless: nothing to carry, and an empty state is accepted
    with pytest.raises(ValueError, match="expected"):
        strategy.load_state_dict({"m": torch.zeros(3)})
