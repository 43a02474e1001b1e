"""An external run on the pages: listed, its dashboard with its config as the spec table and a
custom-metrics chart per prefix, and a silent run shown as crashed."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from orchestrator.experiments.models import Experiment, Status
from orchestrator.external.models import ExternalRun
from orchestrator.web.external_dashboard import config_groups, custom_charts
from tests.external.conftest import post_rounds

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(alice, client):
    client.force_login(alice.user)
    return client


def test_listed_and_dashboard_shows_config_and_custom_metrics(run, page):
    pk, token_client = run
    post_rounds(
        token_client, pk,
        {"round": 1, "metrics": {"loss": 0.9, "grad/norm": 1.0, "grad/max": 3.0, "lr": 0.1}},
        {"round": 2, "metrics": {"loss": 0.8, "grad/norm": 0.5, "grad/max": 2.0, "lr": 0.05}},
    )  # fmt: skip
    listing = page.get("/").content.decode()
    assert f'href="/experiments/{pk}/"' in listing and ">external</span>" in listing
    html = page.get(f"/experiments/{pk}/").content.decode()
    assert 'id="custom-metrics"' in html and 'id="custom-grad"' in html and 'id="custom-lr"' in html
    assert "<code>model.width</code>" in html and "<code>lr</code>" in html  # the config as the spec table
    charts = custom_charts(Experiment.objects.get(pk=pk))
    grad = charts["figures"]["custom-grad"]["data"]
    assert [(t["name"], t["x"], t["y"]) for t in grad] == [
        ("grad/max", [1, 2], [3.0, 2.0]),
        ("grad/norm", [1, 2], [1.0, 0.5]),
    ]


def test_config_groups_flatten_sections():
    groups = config_groups({"lr": 0.1, "model": {"width": 8, "depth": 2}})
    assert [(g["name"], [r["field"] for r in g["rows"]]) for g in groups] == [
        ("config", ["lr"]),
        ("model", ["model.width", "model.depth"]),
    ]


@override_settings(FEDWEB_EXTERNAL_CRASH_AFTER=30)
def test_a_silent_run_shows_as_crashed_on_read(run, page):
    pk, _ = run
    ExternalRun.objects.filter(experiment_id=pk).update(last_report=timezone.now() - timedelta(seconds=31))
    assert page.get(f"/experiments/{pk}/").status_code == 200
    experiment = Experiment.objects.get(pk=pk)
    assert experiment.status == Status.CRASHED and "No report for 30 s" in experiment.error


def test_a_metric_alone_in_its_group_keeps_its_full_name_as_title_and_in_the_legend(run):
    pk, token_client = run
    post_rounds(token_client, pk, {"round": 1, "metrics": {"loss": 0.9, "grad/norm": 1.0}})

    charts = custom_charts(Experiment.objects.get(pk=pk))

    assert [p["title"] for p in charts["panels"]] == ["grad/norm"]
    figure = charts["figures"]["custom-grad"]
    assert figure["layout"]["showlegend"] is True and [t["name"] for t in figure["data"]] == ["grad/norm"]


def test_it_hides_the_charts_a_script_reported_nothing_for_and_names_them(run, page):
    pk, token_client = run
    post_rounds(token_client, pk, {"round": 1, "metrics": {"loss": 0.9, "accuracy": 0.4}})

    response = page.get(f"/experiments/{pk}/")

    hidden = {p["title"] for p in response.context["charts"]["panels"] if p["hidden"]}
    assert hidden == {"Memory per round", "Bandwidth", "Round time and throughput", "Participants per round"}
    assert {"Loss", "Test accuracy"}.isdisjoint(hidden)
    html = response.content.decode()
    assert 'id="charts-unreported"' in html and "Not reported by this run so far: <span>Memory per round," in html


def test_it_offers_neither_pause_nor_priority_for_a_run_a_script_drives(run, page):
    pk, token_client = run
    post_rounds(token_client, pk, {"round": 1, "metrics": {"loss": 0.9}})

    html = page.get(f"/experiments/{pk}/").content.decode()

    assert 'id="btn-pause"' not in html and 'id="btn-resume"' not in html and 'id="id_priority"' not in html
    assert 'id="btn-cancel"' in html  # the run can still be ended from here
    assert '<b id="st-worker">external</b>' in html  # the status line says what the rounds table says


def test_its_live_rounds_name_the_worker_the_rounds_table_shows(run, monkeypatch, django_capture_on_commit_callbacks):
    from orchestrator.live import events

    sent = []
    monkeypatch.setattr(events, "publish_rounds", lambda pk, rounds: sent.extend(rounds))
    pk, token_client = run
    with django_capture_on_commit_callbacks(execute=True):
        post_rounds(token_client, pk, {"round": 1, "metrics": {"loss": 0.9}})

    stored = Experiment.objects.get(pk=pk).rounds.get(round=1).worker
    assert [m["worker"] for m in sent] == [stored] == ["external"]
