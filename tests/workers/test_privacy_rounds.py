"""A DP run through the real round task: ε is recorded every round, grows, matches the accountant,
and ends where the New experiment form projected; the dashboard draws it."""

import pytest

from orchestrator.experiments.models import Status
from orchestrator.experiments.privacy_budget import epsilon
from orchestrator.experiments.round_table import rounds_of
from orchestrator.web.charts import dashboard_charts
from orchestrator.web.estimates import privacy_estimate
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from workers.rounds import run_inline

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_round_cache")]

DP_SPEC = {
    **TINY_SPEC,
    "rounds": 4,
    "privacy": {"mechanism": "gaussian", "clip_norm": 1.0, "noise_multiplier": 1.1, "delta": 1e-5},
}


def test_it_records_the_epsilon_spent_after_each_dp_round(user):
    e = new_experiment(owner=user, name="dp", spec=DP_SPEC)
    e.start(enqueue=False)
    e = run_inline(e)
    assert e.status == Status.COMPLETED, e.error
    spent = list(e.rounds.order_by("round").values_list("dp_epsilon", flat=True))
    assert len(spent) == 4 and all(eps is not None and eps > 0 for eps in spent)
    assert spent == sorted(spent) and spent[0] < spent[-1]  # privacy is only ever spent
    q = DP_SPEC["participation"]["clients_per_round"] / DP_SPEC["data"]["num_clients"]
    for r, eps in enumerate(spent, start=1):  # the same accountant, computed independently
        assert eps == pytest.approx(epsilon(1.1, q, r, 1e-5))
    projected = privacy_estimate(e.parsed_spec())
    assert projected["epsilon"] == pytest.approx(spent[-1]) and projected["delta"] == 1e-5
    assert all(c is not None for c in e.rounds.values_list("dp_clip_norm", flat=True))


def test_it_draws_privacy_and_client_charts_only_for_runs_that_record_them(user):
    e = new_experiment(owner=user, name="dp", spec=DP_SPEC)
    e.start(enqueue=False)
    e = run_inline(e)
    with_dp = dashboard_charts(rounds_of(e), e.spec)
    assert "chart-privacy" in with_dp["figures"]
    eps_trace = next(t for t in with_dp["figures"]["chart-privacy"]["data"] if t["name"] == "ε")
    assert eps_trace["y"] == list(e.rounds.order_by("round").values_list("dp_epsilon", flat=True))
    plain = new_experiment(owner=user, name="plain", spec=TINY_SPEC)
    assert "chart-privacy" not in dashboard_charts([], plain.spec)["figures"]
    assert "chart-clients" not in dashboard_charts([], plain.spec)["figures"]
    assert privacy_estimate(plain.parsed_spec()) is None
