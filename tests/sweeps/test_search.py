"""A search's decisions applied to runs, with hand-made round values: runs wait at a rung for their
other seeds, the value is averaged over seeds and the last k evaluated rounds, a failed seed is left
out, a stopped configuration is paused with a log that says where it stood, promotions resume the
same runs, a run resumed by hand leaves the search, and a search always ends with one configuration
trained in full. Each run "reports" as the round task does: its row recorded, then ``reported``."""

from __future__ import annotations

import pytest

from orchestrator.models import Experiment, RoundMetric, Trial
from orchestrator.sweeps import search
from orchestrator.sweeps.create import create_sweep
from tests.conftest import TINY_SPEC
from tests.factories import round_result

pytestmark = pytest.mark.django_db
LRS = [0.1, 0.05, 0.01, 0.005]


def _sweep(user, *, lrs=LRS, seeds=(0, 1), rounds=5, **search_options):
    options = {"first_rung": 1, "eta": 2, "last_k": 2, **search_options}
    return create_sweep(owner=user, name="s", base={**TINY_SPEC, "rounds": rounds},
                        axes={"local.lr": list(lrs), "seed": list(seeds)}, stopping="asha", search=options)  # fmt: skip


def _runs(sweep, lr) -> list[Experiment]:
    trial = Trial.objects.get(sweep=sweep, params={"local.lr": lr})
    return list(trial.runs.order_by("pk"))


def _report(run: Experiment, n: int, **values) -> Experiment:
    """Round ``n`` of ``run`` recorded with ``values`` (test_accuracy...), then the search decides."""
    RoundMetric.record(run, round_result(n, **values))
    status = "completed" if n >= run.total_rounds else "running"
    Experiment.objects.filter(pk=run.pk).update(current_round=n, status=status)
    run.refresh_from_db()
    search.reported(run)
    run.refresh_from_db()
    return run


def _both(sweep, lr, n, *accuracies) -> list[Experiment]:
    return [_report(r, n, test_accuracy=a) for r, a in zip(_runs(sweep, lr), accuracies, strict=True)]


def _trial(sweep, lr) -> Trial:
    return Trial.objects.get(sweep=sweep, params={"local.lr": lr})


def _log(run: Experiment) -> list[str]:
    return list(run.log_entries.values_list("message", flat=True))


def test_a_run_waits_at_its_rung_for_its_other_seeds_then_the_configuration_is_judged_on_their_mean(user):
    sweep = _sweep(user)
    first, second = _runs(sweep, 0.1)
    assert _report(first, 1, test_accuracy=0.4).status == "paused"
    assert any("Waits at rung 1 (round 1) for its other seeds (1 of 2 there)" in m for m in _log(first))
    assert _trial(sweep, 0.1).values == {}  # not judged on one seed
    _report(second, 1, test_accuracy=0.6)
    trial = _trial(sweep, 0.1)
    assert trial.values == {"1": pytest.approx(0.5)}
    # n = 1 < η = 2: it cannot rank in the top ⌊1/2⌋ = 0 yet, so it is stopped (paused) where it stands.
    assert trial.state == "stopped" and (trial.rung, trial.rank, trial.ranked) == (1, 1, 1)
    assert {r.status for r in _runs(sweep, 0.1)} == {"paused"}
    assert any("Stopped by the search at rung 1 (round 1, rank 1 of 1)" in m for m in _log(first))


def test_a_stopped_configuration_is_promoted_when_it_ranks_in_and_continues_the_same_runs(user, enqueued):
    sweep = _sweep(user)
    _both(sweep, 0.1, 1, 0.5, 0.7)  # 0.6: stopped, alone at rung 1
    _both(sweep, 0.05, 1, 0.2, 0.2)  # n = 2, top 1 is 0.1's: this one stops, 0.1 is promoted
    assert _trial(sweep, 0.05).state == "stopped" and _trial(sweep, 0.05).rank == 2
    promoted = _trial(sweep, 0.1)
    assert promoted.state == "running" and (promoted.rank, promoted.ranked) == (1, 2)
    runs = _runs(sweep, 0.1)
    assert {r.status for r in runs} == {"queued"} and {r.current_round for r in runs} == {1}
    assert any("Promoted by the search at rung 1 (round 1, now rank 1 of 2): continues from its round state" in m
               for m in _log(runs[0]))  # fmt: skip
    assert (runs[0].pk, 2) in [tuple(args) for args, _ in enqueued]  # its next round is round 2, not round 1


def test_the_value_is_the_mean_over_seeds_of_the_last_k_evaluated_rounds(user):
    sweep = _sweep(user, first_rung=2, last_k=2)  # rungs at rounds 2 and 4
    a, b = _runs(sweep, 0.1)
    _report(a, 1, test_accuracy=0.2)
    _report(a, 2, test_accuracy=None)  # a round without evaluation is skipped, not a zero
    _report(b, 1, test_accuracy=0.4)
    _report(b, 2, test_accuracy=0.8)
    # a: mean(0.2) = 0.2; b: mean(0.4, 0.8) = 0.6; the configuration: their mean, 0.4.
    assert _trial(sweep, 0.1).values == {"2": pytest.approx(0.4)}


def test_a_seed_that_fails_is_left_out_and_the_decision_goes_ahead_without_it(user):
    sweep = _sweep(user)
    first, second = _runs(sweep, 0.1)
    assert _report(first, 1, test_accuracy=0.9).status == "paused"  # waits for the second seed
    second.fail("Round 1 failed: RuntimeError: boom")  # the round task's failure; the signal decides
    trial = _trial(sweep, 0.1)
    assert trial.values == {"1": pytest.approx(0.9)}  # the surviving seed alone, not a mean with nothing
    assert trial.state == "stopped" and Experiment.objects.get(pk=first.pk).status == "paused"
    third, fourth = _runs(sweep, 0.05)
    third.fail("boom")
    fourth.cancel(by="alice")
    assert _trial(sweep, 0.05).state == "failed"  # no seed left


def test_a_lower_is_better_metric_stops_the_higher_loss(user):
    sweep = _sweep(user, target="test_loss", eta=2)
    assert sweep.search["direction"] == "minimize"  # the default for a loss
    for lr, loss in ((0.1, 0.3), (0.05, 0.9)):
        for run in _runs(sweep, lr):
            _report(run, 1, test_loss=loss)
    assert _trial(sweep, 0.1).state == "running" and _trial(sweep, 0.05).state == "stopped"
    assert _trial(sweep, 0.05).rank == 2


def test_a_configuration_that_improves_after_a_bad_rung_stays_stopped(user):
    sweep = _sweep(user)
    _both(sweep, 0.1, 1, 0.6, 0.6)
    _both(sweep, 0.05, 1, 0.5, 0.5)  # 0.1 promoted, this one stopped at rung 1 (rank 2 of 2)
    late = _trial(sweep, 0.05)
    assert late.state == "stopped"
    # Its seeds would have shone later, but the search judged rung 1 and nothing trains it further.
    assert {r.current_round for r in _runs(sweep, 0.05)} == {1}
    _both(sweep, 0.1, 2, 0.61, 0.61)  # the leader reaches rung 2 alone: stopped there, nothing promoted
    assert _trial(sweep, 0.05).state == "stopped"


def test_when_nothing_is_left_to_run_the_best_of_the_highest_rung_runs_on_to_the_end(user):
    sweep = _sweep(user, lrs=[0.1, 0.05], eta=3)
    _both(sweep, 0.1, 1, 0.3, 0.3)
    _both(sweep, 0.05, 1, 0.5, 0.5)  # n = 2 < 3: both stopped; nothing runs, nothing completed
    assert _trial(sweep, 0.1).state == "stopped"
    best = _trial(sweep, 0.05)
    assert best.state == "running"
    assert any("nothing else is left to run" in m for m in _log(_runs(sweep, 0.05)[0]))
    for n in (2, 3, 4, 5):
        for run in _runs(sweep, 0.05):
            if run.status == "paused":
                run.resume(by="test")  # the search paused it at rung 3 and promoted it again meanwhile
            _report(run, n, test_accuracy=0.5 + n / 100)
    best = _trial(sweep, 0.05)
    assert best.state == "completed" and best.value == pytest.approx((0.54 + 0.55) / 2)
    assert _trial(sweep, 0.1).state == "stopped"  # the search is over: it stays paused


def test_a_stopped_run_resumed_by_hand_runs_to_its_full_length_outside_the_search(user):
    sweep = _sweep(user, lrs=[0.1, 0.05, 0.01])
    _both(sweep, 0.1, 1, 0.9, 0.9)
    _both(sweep, 0.05, 1, 0.2, 0.2)
    _both(sweep, 0.01, 1, 0.1, 0.1)
    run = _runs(sweep, 0.01)[0]
    assert run.status == "paused" and run.resume(by="alice")
    for n in (2, 3, 4):
        assert _report(run, n, test_accuracy=0.3).status == "running"  # no rung pauses it any more
    assert _trial(sweep, 0.01).state == "manual"
    assert _report(run, 5, test_accuracy=0.3).status == "completed"


def test_a_cancelled_search_promotes_nothing(user):
    sweep = _sweep(user, lrs=[0.1, 0.05], eta=3)
    _both(sweep, 0.1, 1, 0.3, 0.3)
    first = _runs(sweep, 0.05)[0]
    _report(first, 1, test_accuracy=0.5)
    sweep.cancel(by="alice")
    assert set(sweep.experiments.values_list("status", flat=True)) == {"cancelled"}
    assert not sweep.trials.filter(state="running").exists()
