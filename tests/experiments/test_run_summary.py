"""A run's summary row and "to target" steps, kept as rounds are recorded (run_summary.py): equal to
``summarize`` of the rounds whatever order or path they come by, and "to target" figures checked
against answers computed by hand on a crafted run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.experiments.summaries import EMPTY, summarize
from orchestrator.models import Experiment, RoundMetric, RunSummary, TargetStep
from orchestrator.runs.run_summary import at_target, fold_all
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result

# The crafted run: test accuracy, seconds, bytes (up + down) and ε of rounds 1-6. Round 2 was not
# evaluated; the accountant missed round 4's and round 5's ε.
ACCURACY = [0.2, None, 0.75, 0.7, 0.81, 0.95]
SECONDS = [1.0, 2.0, 1.5, 1.0, 0.5, 3.0]
BYTES = [100, 200, 300, 400, 500, 600]  # up; down is the same: each round moves twice this
EPSILON = [0.1, 0.2, 0.35, None, None, 0.9]
# By hand, "the first recorded round at or above the target" and what the run had spent by then:
HAND = {
    0.8: (5, 1.0 + 2.0 + 1.5 + 1.0 + 0.5, 2 * (100 + 200 + 300 + 400 + 500), 0.35),  # ε: the last known, round 3's
    0.75: (3, 4.5, 2 * 600, 0.35),  # at or above: 0.75 itself reaches it
    0.7: (3, 4.5, 2 * 600, 0.35),  # round 4's 0.7 comes later than round 3's 0.75
    0.1: (1, 1.0, 200, 0.1),
    0.95: (6, 9.0, 2 * 2100, 0.9),
}


def crafted(n: int) -> dict:
    i = n - 1
    return round_result(n, test_accuracy=ACCURACY[i], round_seconds=SECONDS[i], bytes_up=BYTES[i],
                        bytes_down=BYTES[i], dp_epsilon=EPSILON[i])  # fmt: skip


def test_to_target_figures_equal_the_hand_computed_answers():
    summary, steps = fold_all(crafted(n) for n in range(1, 7))
    for target, (rounds, seconds, nbytes, epsilon) in HAND.items():
        step = at_target(steps, target)
        assert (step["round"], step["bytes"], step["epsilon"]) == (rounds, nbytes, epsilon), target
        assert step["seconds"] == pytest.approx(seconds)
    assert at_target(steps, 0.96) is None and summary["best_accuracy"] == 0.95  # never reached: its best is known
    assert [s["round"] for s in steps] == [1, 3, 5, 6]  # where the best rose


@pytest.mark.django_db
@pytest.mark.parametrize("order", [[1, 2, 3, 4, 5, 6], [1, 2, 4, 3, 6, 5], [6, 5, 4, 3, 2, 1]])
def test_the_database_keeps_the_same_figures_whatever_order_rounds_arrive_in(user, order):
    experiment = new_experiment(owner=user, name="crafted", spec=TINY_SPEC)
    for n in order:
        RoundMetric.record(experiment, crafted(n))
        RoundMetric.record(experiment, crafted(n))  # a second delivery changes nothing
    rounds = [crafted(n) for n in range(1, 7)]
    kept = RunSummary.objects.get(pk=experiment.pk).state()
    assert {k: kept[k] for k in EMPTY} == pytest.approx(summarize(rounds))
    steps = list(TargetStep.objects.filter(experiment=experiment).order_by("round").values())
    assert [(s["round"], s["value"], s["bytes"], s["epsilon"]) for s in steps] == [
        (s["round"], s["value"], s["bytes"], s["epsilon"]) for s in fold_all(rounds)[1]
    ]


@pytest.mark.django_db
def test_the_table_and_the_compare_page_show_the_hand_computed_figures(alice_client, user):
    from orchestrator.web.views.compare import to_target_text

    experiment = Experiment.objects.create(owner=user, name="crafted", spec=TINY_SPEC, status="completed")
    for n in range(1, 7):
        RoundMetric.record(experiment, crafted(n))
    columns = "rounds_to_target,seconds_to_target,mb_to_target,epsilon_at_target"
    for target, (rounds, seconds, nbytes, epsilon) in HAND.items():
        row = alice_client.get(f"/api/experiments/?columns={columns}&target={target}").json()["results"][0]
        assert row["values"] == {"rounds_to_target": rounds, "seconds_to_target": pytest.approx(seconds),
                                 "mb_to_target": pytest.approx(nbytes / 1e6), "epsilon_at_target": epsilon}  # fmt: skip
    assert to_target_text([crafted(n) for n in range(1, 7)], 0.8) == "round 5 · 6.0 s · 0.003 MB · ε 0.350"
    assert to_target_text([crafted(n) for n in range(1, 7)], 0.97) == "– (best 0.9500)"
    html = alice_client.get(f"/?columns={columns}&target=0.97").content.decode()
    assert html.count("– (best 0.9500)") == 4  # every "to target" cell of the run that never reached it
    other = new_experiment(owner=user, name="other", spec=TINY_SPEC)
    compare = alice_client.get(f"/compare/?ids={experiment.pk},{other.pk}&target=0.8").content.decode()
    assert "round 5 · 6.0 s · 0.003 MB · ε 0.350" in compare and "–</span>" in compare  # beside each run's legend


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), min_size=1, max_size=30), st.floats(0, 1))
def test_the_first_round_at_or_above_a_target_is_the_step_found(accuracies, target):
    rounds = [round_result(n, test_accuracy=a) for n, a in enumerate(accuracies, start=1)]
    step = at_target(fold_all(rounds)[1], target)
    first = next((n for n, a in enumerate(accuracies, start=1) if a is not None and a >= target), None)
    assert (step["round"] if step else None) == first
    assert step is None or step["seconds"] == pytest.approx(0.5 * first)  # the factory's 0.5 s a round
