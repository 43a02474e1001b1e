"""A search from the API and the form: every bad setting named at once (a 400 listing each bad field,
the form's errors beside each field), nothing stored; a TPE search creates its first configurations,
as many as its worker cap holds seeds of; the page shows each configuration's decisions, the best
one and the compute used against the full grid's; the scheduler never sends more of a sweep's
rounds at once than its cap."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from orchestrator.fleet.scheduling import schedule
from orchestrator.models import Experiment, RoundMetric, Sweep, Worker
from orchestrator.sweeps.create import create_sweep
from tests.conftest import TINY_SPEC
from tests.factories import round_result
from tests.sweeps.test_search import _both
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db
TPE = {"budget": 4, "ranges": {"local.lr": {"low": 0.001, "high": 0.5, "log": True}}}


@pytest.fixture
def alice(client, user):
    client.force_login(user)
    return client


def _post(client, **body):
    data = {"name": "search", "spec": TINY_SPEC, "axes": {"seed": [0, 1]}, **body}
    return client.post(reverse("api_sweeps"), data, content_type="application/json")


def test_a_search_with_bad_settings_gets_one_400_listing_every_bad_field(alice):
    hostile = {
        "budget": 0, "eta": 1, "last_k": "3", "target": "__class__", "direction": "up", "colour": "red",
        "ranges": {
            "local.lr": {"low": 0, "high": 0.5, "log": True},  # a log range from 0
            "local.epochs": {"type": "int", "low": 3, "high": 1},  # reversed
            "algorithm.name": {"type": "choice", "choices": []},
            "model.nope": {"low": 0, "high": 1},  # not a spec field
            "data.alpha": {"low": "0", "high": True},  # a string and a boolean
            "participation.clients_per_round": {"low": 1, "high": 8, "step": 2},  # an unknown setting
        },
    }  # fmt: skip
    response = _post(alice, mode="tpe", stopping="asha", search=hostile, max_workers=0)
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) >= {
        "budget", "eta", "last_k", "target", "direction", "colour", "max_workers", "ranges.local.lr",
        "ranges.local.epochs", "ranges.algorithm.name", "ranges.model.nope", "ranges.data.alpha",
        "ranges.participation.clients_per_round",
    }  # fmt: skip
    assert "a log range needs low > 0" in errors["ranges.local.lr"][0]
    assert "low (3) must be below high (1)" in errors["ranges.local.epochs"][0]
    assert "model.nope is not a spec field" in errors["ranges.model.nope"][0]
    assert not Sweep.objects.exists() and not Experiment.objects.exists()


def test_a_range_the_spec_refuses_at_one_end_is_named_with_that_end(alice):
    search = {"budget": 2, "ranges": {"local.lr": {"low": 0, "high": 0.5}, "local.epochs": {"type": "int", "low": 1,
                                                                                               "high": 5000}}}  # fmt: skip
    errors = _post(alice, mode="tpe", search=search).json()
    assert errors["ranges.local.lr"][0].startswith("ranges.local.lr at 0: local.lr must be > 0")
    assert errors["ranges.local.epochs"][0].startswith("ranges.local.epochs at 5000: local.epochs must be <= 1000")


def test_a_first_rung_at_or_past_the_runs_length_or_before_any_evaluation_is_refused(alice):
    axes = {"local.lr": [0.1, 0.01], "seed": [0]}
    late = _post(alice, axes=axes, stopping="asha", search={"first_rung": 5}).json()
    assert "first_rung (5) must be below the runs' rounds (5)" in late["first_rung"][0]
    spec = {**TINY_SPEC, "evaluation": {"every": 3}}
    early = _post(alice, spec=spec, axes=axes, stopping="median", search={"first_rung": 2}).json()
    assert "comes before the first evaluated round (evaluation.every = 3)" in early["first_rung"][0]
    grid = _post(alice, axes=axes, search={"budget": 3})  # a grid with TPE's settings but no search
    assert grid.status_code == 201  # settings of a mode not chosen are not judged: no search runs


def test_a_tpe_search_starts_as_many_configurations_as_its_worker_cap_holds_seeds_of(alice, enqueued):
    response = _post(alice, mode="tpe", search=TPE, max_workers=4)
    assert response.status_code == 201, response.content
    body = response.json()
    sweep = Sweep.objects.get()
    assert sweep.trials.count() == 2 and sweep.experiments.count() == 4  # 4 workers / 2 seeds
    for trial in body["search"]["trials"]:
        assert 0.001 <= trial["params"]["local.lr"] <= 0.5 and len(trial["runs"]) == 2
    assert body["search"]["compute"]["full_rounds"] == 4 * 2 * TINY_SPEC["rounds"]  # budget x seeds x rounds
    assert body["stopping"] == "none" and body["max_workers"] == 4


def test_the_form_names_each_search_field_and_creates_a_tpe_search(alice, enqueued):
    fields = {**form_data(rounds="4"), "name": "tpe", "mode": "tpe", "seeds": "0", "sample_seed": "0",
              "stopping": "none", "visibility": "private"}  # fmt: skip
    bad = alice.post(reverse("sweep_new"), {**fields, "budget": "3", "ranges": "local.lr: log 0..0.5\nlocal.mu 1"})
    assert "line 2 must read field: low..high" in " ".join(bad.context["form"].errors["ranges"])
    bad = alice.post(reverse("sweep_new"), {**fields, "budget": "", "eta": "1", "ranges": "local.lr: log 0..0.5"})
    errors = bad.context["form"].errors
    assert "a log range needs low > 0" in " ".join(errors["ranges"]) and "budget" in errors and "eta" in errors
    assert not Sweep.objects.exists()
    good = alice.post(reverse("sweep_new"), {**fields, "budget": "3", "ranges": "local.lr: log 0.001..0.5"})
    assert good.status_code == 302, good.context["form"].errors
    sweep = Sweep.objects.get()
    assert sweep.search["ranges"] == {"local.lr": {"type": "float", "low": 0.001, "high": 0.5, "log": True}}
    clone = alice.get(reverse("sweep_new") + f"?clone={sweep.pk}").context["form"].initial
    assert clone["ranges"] == "local.lr: log 0.001..0.5" and clone["mode"] == "tpe" and clone["budget"] == 3


def test_the_page_shows_the_decisions_the_best_configuration_and_the_compute_saved(alice, user, enqueued):
    sweep = create_sweep(owner=user, name="s", base=TINY_SPEC, axes={"local.lr": [0.1, 0.05, 0.01], "seed": [0, 1]},
                         stopping="asha", search={"first_rung": 1, "eta": 2, "last_k": 1})  # fmt: skip
    _both(sweep, 0.1, 1, 0.5, 0.7)
    _both(sweep, 0.05, 1, 0.2, 0.2)
    _both(sweep, 0.01, 1, 0.1, 0.2)  # n = 3, top 1 (0.1's): 0.05 and 0.01 stopped at rung 1
    page = alice.get(reverse("sweep_detail", args=[sweep.pk]))
    html = page.content.decode()
    assert "stopped at rung 1 (rank 2 of 3)" in html and "stopped at rung 1 (rank 3 of 3)" in html
    assert "6</b> rounds trained of 30 for the full grid" in html and "20.0%" in html
    assert "Best: <b>lr=0.1</b>" in html and "so far, at round 1" in html and "0.5000 – 0.7000" in html
    rungs = page.context["figures"]["sweep-rungs"]["data"]
    assert [t["meta"]["faded"] for t in rungs] == [False, True, True]
    assert page.context["figures"]["sweep-rungs"]["layout"]["xaxis"]["type"] == "log"
    live = alice.get(reverse("sweep_live", args=[sweep.pk])).json()
    assert "stopped at rung 1 (rank 2 of 3)" in live["search"] and "sweep-rungs" in live["figures"]


def test_the_scheduler_sends_no_more_of_a_sweep_s_rounds_than_its_worker_cap(user, enqueued):
    Worker.objects.create(hostname="w1@h", queue="cpu", slots=8)
    sweep = create_sweep(owner=user, name="capped", base=TINY_SPEC, axes={"local.lr": [0.1, 0.05, 0.01],
                         "seed": [0, 1]}, max_workers=2)  # fmt: skip
    other = Experiment.objects.create(owner=user, name="other", spec=TINY_SPEC)
    other.start()
    sent = [args[0] for args, _ in enqueued]
    ours = [pk for pk in sent if pk in set(sweep.experiments.values_list("pk", flat=True))]
    assert len(ours) == 2 and other.pk in sent  # the cap holds the sweep back, not the queue
    first = Experiment.objects.get(pk=ours[0])
    assert first.claim(1, "w1@h", 1)
    RoundMetric.record(first, round_result(1))
    assert first.advance(1)
    assert [pk for pk, _ in schedule("cpu")] == [first.pk]  # its slot came back: one more, no more
    assert schedule("cpu") == []
    Sweep.objects.filter(pk=sweep.pk).update(max_workers=3)
    assert len(schedule("cpu")) == 1
    assert json.loads(json.dumps(Sweep.objects.get(pk=sweep.pk).sends)) >= 4
