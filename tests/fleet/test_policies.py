"""Scheduling policies as pure functions: each policy's order, ties, ageing, srtf estimates, fair shares, packing."""

import subprocess
import sys

import pytest

from orchestrator.fleet import policies
from orchestrator.fleet.placement import Fleet, WorkerRoom, place
from orchestrator.fleet.policies import POLICIES, Candidate, QueueView, order, pack_fits, remaining_seconds

NOW = 10_000.0


def cand(eid: int, **kw) -> Candidate:
    fields = {
        "experiment_id": eid,
        "share_key": f"user:{eid}",
        "priority": 0,
        "submitted": NOW - 100 + eid,
        "ready_since": NOW - 10,
        "rounds_left": 10,
        "round_seconds": None,
        "peak_mem_mb": None,
    }
    fields.update(kw)
    return Candidate(**fields)


def view(**kw) -> QueueView:
    fields = {"now": NOW, "service_seconds": {}, "probe_round_seconds": 1.0, "age_boost_seconds": 600.0}
    fields.update(kw)
    return QueueView(**fields)


def ids(cands: list[Candidate]) -> list[int]:
    return [c.experiment_id for c in cands]


def test_it_orders_fifo_by_submission_then_id():
    ready = [cand(3, submitted=5.0), cand(1, submitted=7.0), cand(2, submitted=5.0)]
    assert ids(order("fifo", ready, view())) == [2, 3, 1]


def test_it_orders_pack_like_fifo():
    ready = [cand(3, submitted=5.0, peak_mem_mb=1.0), cand(1, submitted=7.0), cand(2, submitted=5.0)]
    assert ids(order("pack", ready, view())) == ids(order("fifo", ready, view()))


def test_it_orders_priority_highest_first_then_fifo():
    ready = [cand(1, priority=0), cand(2, priority=5), cand(3, priority=5, submitted=0.0), cand(4, priority=-1)]
    assert ids(order("priority", ready, view())) == [3, 2, 1, 4]


def test_it_estimates_remaining_time_from_measured_rounds():
    assert remaining_seconds(cand(1, rounds_left=4, round_seconds=2.5), view()) == 10.0


def test_it_estimates_unmeasured_experiments_with_the_probe_round():
    assert remaining_seconds(cand(1, rounds_left=4), view(probe_round_seconds=0.5)) == 2.0


def test_it_orders_srtf_shortest_remaining_first():
    long = cand(1, rounds_left=100, round_seconds=1.0)  # 100 s left
    short = cand(2, rounds_left=3, round_seconds=2.0)  # 6 s left
    middle = cand(3, rounds_left=10, round_seconds=2.0)  # 20 s left
    assert ids(order("srtf", [long, short, middle], view())) == [2, 3, 1]


def test_it_ranks_a_new_experiment_by_its_probe_estimate_under_srtf():
    measured = cand(1, rounds_left=5, round_seconds=3.0)  # 15 s
    new_short = cand(2, rounds_left=5)  # 5 x 1 s probe = 5 s
    new_long = cand(3, rounds_left=50)  # 50 s
    assert ids(order("srtf", [measured, new_short, new_long], view(probe_round_seconds=1.0))) == [2, 1, 3]


def test_it_breaks_srtf_ties_by_submission_then_id():
    ready = [cand(3, round_seconds=1.0, submitted=2.0), cand(2, round_seconds=1.0, submitted=1.0)]
    ready.append(cand(1, round_seconds=1.0, submitted=2.0))
    assert ids(order("srtf", ready, view())) == [2, 1, 3]


def test_it_orders_fair_by_least_service_per_share_key():
    ready = [
        cand(1, share_key="user:a", submitted=1.0),
        cand(2, share_key="user:a", submitted=2.0),
        cand(3, share_key="user:b", submitted=3.0),
        cand(4, share_key="team:7", submitted=4.0),
    ]
    service = {"user:a": 50.0, "user:b": 10.0, "team:7": 30.0}
    assert ids(order("fair", ready, view(service_seconds=service))) == [3, 4, 1, 2]


def test_it_counts_an_unknown_share_key_as_no_service_under_fair():
    ready = [cand(1, share_key="user:a", submitted=1.0), cand(2, share_key="user:new", submitted=2.0)]
    assert ids(order("fair", ready, view(service_seconds={"user:a": 0.1}))) == [2, 1]


def test_it_breaks_fair_ties_by_submission():
    ready = [cand(2, share_key="user:b", submitted=2.0), cand(1, share_key="user:a", submitted=1.0)]
    assert ids(order("fair", ready, view(service_seconds={"user:a": 5.0, "user:b": 5.0}))) == [1, 2]


@pytest.mark.parametrize("policy", POLICIES)
def test_it_puts_a_candidate_waiting_past_the_age_boost_first_under_every_policy(policy):
    # The starved one loses on every policy's own criterion: submitted last, lowest priority, longest,
    # its share key has the most service.
    starved = cand(
        9,
        submitted=NOW,
        priority=-10,
        rounds_left=1000,
        round_seconds=100.0,
        share_key="user:big",
        ready_since=NOW - 601,
    )
    others = [cand(i, ready_since=NOW - 5, round_seconds=1.0, rounds_left=1, priority=10) for i in (1, 2, 3)]
    v = view(age_boost_seconds=600.0, service_seconds={"user:big": 1e9})
    assert ids(order(policy, [*others, starved], v))[0] == 9
    # Just under the boost it is ranked by the policy alone, and loses.
    not_yet = cand(
        9,
        submitted=NOW,
        priority=-10,
        rounds_left=1000,
        round_seconds=100.0,
        share_key="user:big",
        ready_since=NOW - 599,
    )
    assert ids(order(policy, [*others, not_yet], v))[-1] == 9


def test_it_orders_boosted_candidates_by_longest_wait():
    ready = [cand(1, ready_since=NOW - 700), cand(2, ready_since=NOW - 900), cand(3, ready_since=NOW - 1)]
    assert ids(order("srtf", ready, view(age_boost_seconds=600.0))) == [2, 1, 3]


def test_it_is_deterministic_whatever_the_input_order():
    ready = [
        cand(i, submitted=float(i % 3), round_seconds=float(i % 4 + 1), share_key=f"user:{i % 2}") for i in range(12)
    ]
    for policy in POLICIES:
        v = view(service_seconds={"user:0": 3.0, "user:1": 3.0})
        assert ids(order(policy, ready, v)) == ids(order(policy, list(reversed(ready)), v))


def test_it_returns_an_empty_order_for_no_candidates():
    assert order("fair", [], view()) == []


def test_it_refuses_an_unknown_policy_by_name():
    with pytest.raises(ValueError, match="policy: unknown 'lifo'"):
        order("lifo", [cand(1)], view())


def test_it_refuses_a_view_with_no_probe_estimate():
    with pytest.raises(ValueError, match="probe_round_seconds"):
        view(probe_round_seconds=0.0)


def test_it_packs_when_peaks_fit_within_capacity_less_the_margin():
    assert pack_fits([400.0], cand(1, peak_mem_mb=500.0), capacity_mb=1000.0, margin=0.1)
    assert not pack_fits([400.0], cand(1, peak_mem_mb=501.0), capacity_mb=1000.0, margin=0.1)


def test_it_packs_up_to_the_whole_capacity_with_no_margin():
    assert pack_fits([400.0, 100.0], cand(1, peak_mem_mb=500.0), capacity_mb=1000.0, margin=0.0)
    assert not pack_fits([400.0, 100.0], cand(1, peak_mem_mb=500.5), capacity_mb=1000.0, margin=0.0)


def test_it_uses_a_ten_percent_margin_by_default():
    assert pack_fits([450.0], cand(1, peak_mem_mb=450.0), capacity_mb=1000.0)
    assert not pack_fits([450.0], cand(1, peak_mem_mb=451.0), capacity_mb=1000.0)


def test_it_never_packs_a_candidate_of_unknown_memory():
    assert not pack_fits([1.0], cand(1, peak_mem_mb=None), capacity_mb=1e6)


def test_it_never_packs_beside_a_round_of_unknown_memory():
    assert not pack_fits([None], cand(1, peak_mem_mb=1.0), capacity_mb=1e6)
    assert not pack_fits([10.0, None], cand(1, peak_mem_mb=1.0), capacity_mb=1e6)


def test_it_always_starts_a_round_on_an_idle_device():
    assert pack_fits([], cand(1, peak_mem_mb=None), capacity_mb=100.0)
    assert pack_fits([], cand(1, peak_mem_mb=5000.0), capacity_mb=100.0)


@pytest.mark.parametrize(
    ("capacity", "margin", "field"), [(0.0, 0.1, "capacity_mb"), (100.0, 1.0, "margin"), (100.0, -0.1, "margin")]
)
def test_it_refuses_a_bad_capacity_or_margin_by_name(capacity, margin, field):
    with pytest.raises(ValueError, match=field):
        pack_fits([1.0], cand(1, peak_mem_mb=1.0), capacity_mb=capacity, margin=margin)


def test_it_imports_without_django_or_celery():
    code = (
        "import sys, orchestrator.fleet.policies; "
        "bad = [m for m in ('django', 'celery', 'channels') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_new_policy_is_one_registered_function_with_its_options(monkeypatch):
    monkeypatch.setattr(policies, "_REGISTRY", dict(policies._REGISTRY))  # forgotten after the test

    @policies.policy("newest", packs=True)
    def _newest(c: Candidate, v: QueueView):
        return (-c.submitted, c.experiment_id)

    assert "newest" in policies.names() and policies.get("newest").packs
    ready = [cand(1, submitted=5.0, peak_mem_mb=100.0), cand(2, submitted=7.0, peak_mem_mb=100.0)]
    assert ids(order("newest", ready, view())) == [2, 1]
    # Its option, not its name, makes placement pack: both rounds go to the one worker's two slots.
    room = WorkerRoom("w1", slots=2, capacity_mb=1000.0, sends=0)
    sent = []
    place("newest", order("newest", ready, view()), Fleet([room], room=1, holders={}), view(),
          lambda c, to: sent.append((c.experiment_id, to)) or True, lambda r: True)  # fmt: skip
    assert sent == [(2, "w1"), (1, "w1")]
    with pytest.raises(ValueError, match="policy: 'newest' is already registered"):
        policies.policy("newest")(_newest)


@pytest.mark.parametrize("policy", POLICIES)
def test_a_background_candidate_goes_after_every_other_whatever_the_policy(policy):
    # The demo: queued first, top priority, shortest, least served, and waiting past the age boost.
    demo = cand(1, submitted=0.0, ready_since=0.0, priority=1000, round_seconds=0.1, rounds_left=1, background=True)
    users = [cand(2, round_seconds=60.0, rounds_left=500), cand(3, priority=-1000)]
    ready = [demo, *users]

    ordered = ids(order(policy, ready, view(service_seconds={"user:2": 1e6, "user:3": 1e6})))

    assert ordered[-1] == 1 and sorted(ordered[:-1]) == [2, 3]
    assert ids(order(policy, [demo], view())) == [1]  # alone, it runs
