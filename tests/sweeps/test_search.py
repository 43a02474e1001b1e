"""A search's decisions applied to runs, with hand-made round values: runs wait at a rung for their
other seeds, the value is averaged over seeds and the last k evaluated rounds, a failed seed is left
out, a stopped configuration is paused with a log that says where it stood, promotions resume the
same runs, a run resumed by hand leaves the search, and a search always ends with one configuration
trained in full. Each run "reports" as the round task does: its row recorded, then ``reported``."""

from __future__ import annotations

import pytest

from orchestrator.models import CustomMetric, Experiment, RoundMetric, Trial
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


def test_a_run_waits_at_its_rung_for_its_seeds_and_a_configuration_for_the_others_then_the_top_1_eta_go_on(user):
    sweep = _sweep(user)  # 4 configurations x 2 seeds, rungs at rounds 1, 2 and 4 (eta = 2)
    first, second = _runs(sweep, 0.1)
    assert _report(first, 1, test_accuracy=0.4).status == "paused"
    assert any("Waits at rung 1 (round 1) for its other seeds (1 of 2 there)" in m for m in _log(first))
    assert _trial(sweep, 0.1).values == {}  # not judged on one seed
    assert _report(second, 1, test_accuracy=0.6).status == "paused"
    trial = _trial(sweep, 0.1)
    assert trial.values == {"1": pytest.approx(0.5)} and trial.state == "running" and trial.rung is None
    assert any("for the configurations still below it (1 there, 3 on their way)" in m for m in _log(second))
    _both(sweep, 0.05, 1, 0.3, 0.3)
    _both(sweep, 0.01, 1, 0.7, 0.7)
    assert {t.state for t in Trial.objects.filter(sweep=sweep)} == {"running"}  # 0.005 is still below rung 1
    _both(sweep, 0.005, 1, 0.1, 0.3)
    # All four at rung 1: by hand 0.7 (0.01), 0.5 (0.1) | 0.3 (0.05), 0.2 (0.005); top 4/2 = 2 go on.
    states = {lr: (_trial(sweep, lr).state, _trial(sweep, lr).rank) for lr in LRS}
    assert states == {0.01: ("running", 1), 0.1: ("running", 2), 0.05: ("stopped", 3), 0.005: ("stopped", 4)}
    assert {r.status for r in _runs(sweep, 0.1)} == {"queued"}  # paused at the rung, now on again
    assert [r.queued_at for r in _runs(sweep, 0.1)] == [first.queued_at, second.queued_at]  # in its place
    assert {r.status for r in _runs(sweep, 0.05)} == {"paused"}
    assert any("Stopped by the search at rung 1 (round 1, rank 3 of 4)" in m for m in _log(_runs(sweep, 0.05)[0]))
    assert any("Continues past rung 1 (round 1, rank 2 of 4)" in m for m in _log(first))


def test_a_configuration_stopped_alone_at_a_rung_is_promoted_when_a_later_one_ranks_below_it(user, enqueued):
    # TPE's configurations come one at a time: each meets its rung alone and is judged against all
    # that reached it before (asynchronous); eta = 2: the first is stopped (n = 1), the second ranks
    # below it (n = 2, top 1), so the first is promoted and its same runs go on.
    sweep = create_sweep(owner=user, name="tpe", base={**TINY_SPEC, "rounds": 5}, axes={"seed": [0, 1]}, mode="tpe",
                         stopping="asha", search={"first_rung": 1, "eta": 2, "last_k": 1, "budget": 2,
                         "ranges": {"local.lr": {"low": 0.01, "high": 0.1}}}, max_workers=2)  # fmt: skip
    first = list(sweep.trials.get(number=0).runs.order_by("pk"))
    for run, acc in zip(first, (0.8, 0.6), strict=True):
        _report(run, 1, test_accuracy=acc)
    assert sweep.trials.get(number=0).state == "stopped"
    second = list(sweep.trials.get(number=1).runs.order_by("pk"))  # made once the first stopped
    for run in second:
        _report(run, 1, test_accuracy=0.5)
    assert sweep.trials.get(number=1).state == "stopped"
    promoted = sweep.trials.get(number=0)
    assert promoted.state == "running" and (promoted.rank, promoted.ranked) == (1, 2)
    runs = [Experiment.objects.get(pk=r.pk) for r in first]
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
    sweep = _sweep(user, lrs=[0.1, 0.05, 0.01])
    _both(sweep, 0.05, 1, 0.5, 0.5)
    _both(sweep, 0.01, 1, 0.2, 0.2)
    first, second = _runs(sweep, 0.1)
    assert _report(first, 1, test_accuracy=0.9).status == "paused"  # waits for its second seed
    second.fail("Round 1 failed: RuntimeError: boom")  # the round task's failure; the signal decides
    trial = _trial(sweep, 0.1)
    assert trial.values == {"1": pytest.approx(0.9)}  # the surviving seed alone, not a mean with nothing
    # The rung is full: 0.9 | 0.5, 0.2 (top 3/2 = 1): its surviving seed goes on, the others stop.
    assert trial.state == "running" and Experiment.objects.get(pk=first.pk).status == "queued"
    assert _trial(sweep, 0.05).state == "stopped" and _trial(sweep, 0.01).state == "stopped"
    third, fourth = _runs(sweep, 0.05)
    third.fail("boom")
    fourth.cancel(by="alice")
    assert _trial(sweep, 0.05).state == "failed"  # no seed left


def test_a_lower_is_better_metric_stops_the_higher_loss(user):
    sweep = _sweep(user, lrs=[0.1, 0.05], target="test_loss", eta=2)
    assert sweep.search["direction"] == "minimize"  # the default for a loss
    for lr, loss in ((0.1, 0.3), (0.05, 0.9)):
        for run in _runs(sweep, lr):
            _report(run, 1, test_loss=loss)
    assert _trial(sweep, 0.1).state == "running" and _trial(sweep, 0.05).state == "stopped"
    assert _trial(sweep, 0.05).rank == 2


def test_a_configuration_that_improves_after_a_bad_rung_stays_stopped(user):
    sweep = _sweep(user)
    _both(sweep, 0.1, 1, 0.6, 0.6)
    _both(sweep, 0.05, 1, 0.5, 0.5)
    _both(sweep, 0.01, 1, 0.3, 0.3)  # the late bloomer: its bad first rounds rank 3rd of 4
    _both(sweep, 0.005, 1, 0.1, 0.1)
    late = _trial(sweep, 0.01)
    assert late.state == "stopped" and late.rank == 3
    # Its seeds would have shone later, but the search judged rung 1 and nothing trains it further.
    assert {r.current_round for r in _runs(sweep, 0.01)} == {1}
    _both(sweep, 0.1, 2, 0.61, 0.61)  # last 2 rounds: (0.6 + 0.61) / 2 = 0.605
    _both(sweep, 0.05, 2, 0.75, 0.75)  # (0.5 + 0.75) / 2 = 0.625: rung 2, n = 2, top 1 goes on
    assert _trial(sweep, 0.05).state == "running" and _trial(sweep, 0.1).state == "stopped"
    assert _trial(sweep, 0.01).state == "stopped"


def test_when_nothing_is_left_to_run_the_best_of_the_highest_rung_runs_on_to_the_end(user):
    sweep = _sweep(user, lrs=[0.1, 0.05], eta=3)
    _both(sweep, 0.1, 1, 0.3, 0.3)
    _both(sweep, 0.05, 1, 0.5, 0.5)  # the rung is full with n = 2 < 3: both stopped; nothing runs
    assert _trial(sweep, 0.1).state == "stopped"
    best = _trial(sweep, 0.05)
    assert best.state == "running"
    assert any("nothing else is left to run" in m for m in _log(_runs(sweep, 0.05)[0]))
    for n in (2, 3, 4, 5):  # alone at rung 2 (round 3) it is stopped, and promoted again at once
        for run in _runs(sweep, 0.05):
            _report(run, n, test_accuracy=0.5 + n / 100)
    assert len([m for m in _log(_runs(sweep, 0.05)[0]) if "nothing else is left to run" in m]) == 2
    best = _trial(sweep, 0.05)
    assert best.state == "completed" and best.value == pytest.approx((0.54 + 0.55) / 2)
    assert _trial(sweep, 0.1).state == "stopped"  # the search is over: it stays paused


def test_a_stopped_run_resumed_by_hand_runs_to_its_full_length_outside_the_search(user):
    sweep = _sweep(user, lrs=[0.1, 0.05, 0.01])
    _both(sweep, 0.1, 1, 0.9, 0.9)
    _both(sweep, 0.05, 1, 0.2, 0.2)
    _both(sweep, 0.01, 1, 0.1, 0.1)  # top 1 of 3 goes on: 0.01 is stopped
    run = _runs(sweep, 0.01)[0]
    assert run.status == "paused" and run.resume(by="alice")
    for n in (2, 3, 4):
        assert _report(run, n, test_accuracy=0.3).status == "running"  # no rung pauses it any more
    assert _trial(sweep, 0.01).state == "manual"
    assert _report(run, 5, test_accuracy=0.3).status == "completed"
    assert _trial(sweep, 0.01).state == "manual"  # its other seed is still paused: no value yet


def test_a_cancelled_search_promotes_nothing(user):
    sweep = _sweep(user, lrs=[0.1, 0.05], eta=3)
    _both(sweep, 0.1, 1, 0.3, 0.3)
    first = _runs(sweep, 0.05)[0]
    _report(first, 1, test_accuracy=0.5)
    sweep.cancel(by="alice")
    assert set(sweep.experiments.values_list("status", flat=True)) == {"cancelled"}
    assert not sweep.trials.filter(state="running").exists()


def test_a_custom_metric_is_the_target_when_named_so(user):
    sweep = _sweep(user, lrs=[0.1, 0.05], target="custom:val/loss")
    assert sweep.search["direction"] == "minimize"
    for lr, loss in ((0.1, 0.8), (0.05, 0.2)):  # their test_accuracy is the same: only this tells them apart
        for run in _runs(sweep, lr):
            CustomMetric.objects.create(experiment=run, round=1, values={"val/loss": loss, "other": 9.0})
            _report(run, 1)
    assert _trial(sweep, 0.05).values == {"1": pytest.approx(0.2)}
    assert _trial(sweep, 0.05).state == "running" and _trial(sweep, 0.1).state == "stopped"
