"""ε from the dp-accounting library, per round and for the whole run."""

import pytest

from fedweb_engine.spec.schema import Spec
from workers.privacy import epsilon, projected_epsilon, spent_epsilon


def test_it_matches_the_librarys_own_example_of_exactly_one_epsilon():
    # dp_accounting's rdp_privacy_accountant_test: z = 4.530877117, q = 1, one step is (1, 1e-6)-DP.
    assert epsilon(4.530877117, 1.0, 1, 1e-6) == pytest.approx(1.0, abs=1e-3)


def test_it_grows_epsilon_with_rounds_and_shrinks_it_with_more_noise():
    spec = Spec.from_dict({"rounds": 50, "privacy": {"mechanism": "gaussian", "noise_multiplier": 1.0}})
    eps = [spent_epsilon(spec, r) for r in (1, 10, 50)]
    assert 0 < eps[0] < eps[1] < eps[2] == projected_epsilon(spec)
    quieter = spec.replace(privacy={"noise_multiplier": 2.0})
    assert projected_epsilon(quieter) < eps[2]


def test_it_reports_no_epsilon_without_dp():
    assert spent_epsilon(Spec.from_dict({}), 5) is None
