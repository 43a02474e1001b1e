"""Searches with a real Celery worker: a 4-configuration x 2-seed ASHA sweep leaves its stopped runs
paused with their round state, promotes runs that then continue without training any round twice
(no replay, every round recorded once, the promoted round loads the state of the round before), and
its page shows the rungs and the compute saved; a stopped run resumed by hand runs to its full
length from its round state. A TPE sweep submitted from the form with a log range for ``local.lr``
runs its budget and reports the best configuration."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from orchestrator.models import ACTIVE, Experiment, Sweep
from orchestrator.sweeps.create import create_sweep
from tests.conftest import TINY_SPEC
from tests.live import wait_for
from tests.web.test_forms import form_data
from workers import round_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LRS = [0.5, 0.1, 0.02, 0.001]


def _settled(sweep: Sweep, what: str, timeout: float = 240, trials: int | None = None) -> list[Experiment]:
    """Wait until the search is over: ``trials`` configurations made (when given), none of them running
    (a run's last round is recorded a moment before the search judges it), no run queued or running."""

    def observe():
        return sorted(sweep.experiments.values_list("pk", "status", "current_round")), list(
            sweep.trials.values_list("number", "state")
        )

    def done():
        runs = list(sweep.experiments.all())
        if trials is not None and sweep.trials.count() < trials or sweep.trials.filter(state="running").exists():
            return None
        return runs if runs and not any(r.status in ACTIVE or r.round_in_flight() for r in runs) else None

    return wait_for(done, timeout, what, interval=0.2, observe=observe)


def _rounds_once(run: Experiment) -> None:
    rounds = list(run.rounds.order_by("round").values_list("round", flat=True))
    assert rounds == list(range(1, run.current_round + 1)), f"run {run.pk} recorded {rounds}"


def _messages(runs, pattern: str) -> list[str]:
    return [m for r in runs for m in r.log_entries.filter(message__contains=pattern).values_list("message", flat=True)]


def test_an_asha_sweep_pauses_the_losers_with_their_state_and_promotes_without_retraining(user, workers):
    workers.start("w1")
    spec = {**TINY_SPEC, "rounds": 4}
    # Rungs at rounds 1 and 3 (eta = 3): the best of the four goes past round 1, meets round 3 alone and is
    # stopped there (fewer than eta reached it), then promoted, nothing else being left to run.
    sweep = create_sweep(owner=user, name="asha", base=spec, axes={"local.lr": LRS, "seed": [0, 1]},
                         stopping="asha", search={"first_rung": 1, "eta": 3, "last_k": 2}, max_workers=2)  # fmt: skip
    runs = _settled(sweep, "the ASHA sweep to settle")

    stopped = [r for r in runs if r.status == "paused"]
    assert stopped and sweep.trials.filter(state="completed").exists(), [(r.pk, r.status) for r in runs]
    for run in stopped:  # paused where the search stopped it, with the state its next round loads
        assert run.current_round == run.trial.rung and run.trial.state == "stopped"
        assert round_state.state_path(run.pk, run.current_round).exists()
        assert _messages([run], "Stopped by the search at rung")
    for run in runs:
        _rounds_once(run)
    promoted = [r for r in runs if _messages([r], "Promoted by the search")]
    assert promoted, "no configuration was promoted"
    for run in promoted:  # the round after its promotion loaded the state of the round before it
        assert _messages([run], "loaded the state of round"), list(run.log_entries.values_list("message", flat=True))
    assert _messages(runs, "replaying") == []  # the replay counter stays 0

    client = Client()
    client.force_login(user)
    page = client.get(reverse("sweep_detail", args=[sweep.pk]))
    html = page.content.decode()
    rungs = page.context["figures"]["sweep-rungs"]["data"]
    assert len(rungs) == 4 and any(t["meta"]["faded"] for t in rungs) and not all(t["meta"]["faded"] for t in rungs)
    trained = sum(r.current_round for r in runs)
    assert f"{trained}</b> rounds trained of 32 for the full grid" in html and trained < 32
    assert "stopped at rung" in html and "at its full length (4 rounds)" in html

    # A stopped run resumed by hand runs to its full length from its round state.
    run = stopped[0]
    at = run.current_round
    assert run.resume(by=user.username)

    def finished():
        run.refresh_from_db()
        return run.is_settled

    wait_for(finished, 120, f"run {run.pk} resumed by hand to finish")
    assert run.status == "completed" and run.current_round == 4
    _rounds_once(run)
    assert _messages([run], f"loaded the state of round {at}") and not _messages([run], "replaying")
    run.trial.refresh_from_db()
    assert run.trial.state == "manual"


def test_a_tpe_sweep_from_the_form_runs_its_budget_and_reports_the_best(user, workers):
    workers.start("w1")
    client = Client()
    client.force_login(user)
    fields = {**form_data(rounds="2", data__dataset="digits", data__num_clients="20", data__image_size="8",
                          model__name="mlp", participation__clients_per_round="4"),
              "name": "tpe lr", "mode": "tpe", "seeds": "0", "sample_seed": "1", "stopping": "none",
              "budget": "3", "max_workers": "1", "ranges": "local.lr: log 0.001..0.5", "visibility": "private"}  # fmt: skip
    response = client.post(reverse("sweep_new"), fields)
    assert response.status_code == 302, response.context["form"].errors
    sweep = Sweep.objects.get()
    runs = _settled(sweep, "the TPE sweep to run its budget", timeout=180, trials=3)
    assert len(runs) == 3 and {r.status for r in runs} == {"completed"}
    trials = list(sweep.trials.order_by("number"))
    assert [t.state for t in trials] == ["completed"] * 3 and all(t.value is not None for t in trials)
    lrs = [t.params["local.lr"] for t in trials]
    assert len(set(lrs)) == 3 and all(0.001 <= lr <= 0.5 for lr in lrs)
    best = client.get(reverse("api_sweep", args=[sweep.pk])).json()["search"]["best"]
    top = max(trials, key=lambda t: t.value)
    assert best["full"] and best["number"] == top.number and best["value"] == pytest.approx(top.value)
    page = client.get(reverse("sweep_detail", args=[sweep.pk]))
    assert f"Best: <b>lr={top.params['local.lr']}</b>" in page.content.decode()
    assert [t["meta"]["role"] for t in page.context["figures"]["sweep-trials"]["data"]] == ["trials", "best"]
