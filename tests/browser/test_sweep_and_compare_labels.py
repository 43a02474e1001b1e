"""A sweep half done and two runs compared, in real Chromium: the configurations' statistics and the
parallel coordinates count completed runs only and say how many, the ε heading reads ε, the compare
legend names the client algorithm (client=scaffold), and the bandwidth chart says what its lines are."""

from __future__ import annotations

import pytest

from orchestrator.models import Experiment, RoundMetric
from orchestrator.sweeps.create import create_sweep
from tests.browser.conftest import log_in
from tests.conftest import TINY_SPEC
from tests.factories import round_result
from tests.web.conftest import make_experiment

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.integration]


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="alice-password")


def _record(e: Experiment, rounds: int, status: str) -> None:
    for n in range(1, rounds + 1):
        RoundMetric.record(e, round_result(n, test_accuracy=0.05 * n, round_seconds=1.0 + e.spec["seed"]))
    Experiment.objects.filter(pk=e.pk).update(current_round=rounds, status=status)


def test_a_half_done_sweep_counts_its_completed_runs_only(page, alice, daphne):
    sweep = create_sweep(owner=alice, name="lr", base={**TINY_SPEC, "rounds": 12},
                         axes={"local.lr": [0.05, 0.1], "seed": [0, 1]}, start=False)  # fmt: skip
    runs = list(sweep.experiments.order_by("pk"))  # (0.05, 0), (0.05, 1), (0.1, 0), (0.1, 1)
    _record(runs[0], 12, "completed")
    _record(runs[1], 6, "running")  # 1 of the 2 seeds of lr=0.05 done: "Rounds 6 ± 6" was shown
    _record(runs[2], 12, "completed")
    _record(runs[3], 12, "completed")
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/sweeps/{sweep.pk}/")

    row = page.locator("#sweep-table tbody tr[data-config='lr=0.05']")
    cells = {key: row.locator(f"td[data-key={key}]").inner_text() for key in ("rounds", "seconds")}
    assert cells == {"rounds": "12 ± 0", "seconds": "12.0 ± 0.0 s"}, cells  # the completed seed alone
    assert "1 of 2 in the figures" in row.inner_text()
    other = page.locator("#sweep-table tbody tr[data-config='lr=0.1']")
    assert "in the figures" not in other.inner_text()
    page.wait_for_function("() => document.getElementById('sweep-parallel').data !== undefined")
    lines = page.evaluate("() => document.getElementById('sweep-parallel').data[0].dimensions[0].values.length")
    assert lines == 3  # the completed runs
    heading = page.locator("#sweep-table th[data-key=epsilon]").inner_text()  # as drawn, uppercase style and all
    assert heading == "FINAL ε", heading
    assert page.errors == []


def test_the_compare_legend_names_the_client_algorithm_and_the_bandwidth_chart_explains_itself(page, alice, daphne):
    scaffold = make_experiment(alice, rounds=4, name="scaffold run",
                               spec={**TINY_SPEC, "algorithm": {"name": "fedavg", "client": {"name": "scaffold"}}})  # fmt: skip
    fedavg = make_experiment(alice, rounds=4, name="fedavg run", spec=TINY_SPEC)
    base = f"http://{daphne}"
    log_in(page, base, "alice", "alice-password")
    page.goto(f"{base}/compare/?ids={scaffold.pk},{fedavg.pk}")
    # Each legend item: its swatch, its label, then its "to target" figures.
    legend = sorted(page.locator("#chart-legend .legend-item").evaluate_all(
        "els => els.map(e => e.childNodes[1].textContent.trim())"))  # fmt: skip
    assert legend == ["client=fedavg", "client=scaffold"]  # not "name=scaffold"

    page.goto(f"{base}/experiments/{scaffold.pk}/")
    page.wait_for_function("() => document.querySelectorAll('#chart-bandwidth .legendtext').length > 0")
    names = page.evaluate(
        "() => [...document.querySelectorAll('#chart-bandwidth .legendtext')].map(t => t.textContent)"
    )
    assert "Σ fp32 formula" in names and "fp32 formula, this round" in names and "Σ formula" not in names
    note = page.inner_text("#chart-bandwidth-note")
    assert "fp32 formula: the same round uncompressed" in note and "Σ lines (right axis)" in note
    assert page.errors == []
