"""The external-run ingestion API: create, report rounds idempotently, finish; token scope."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from fedweb_engine.results import round_fields
from orchestrator.experiments import summaries
from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.liveness import mark_crashed
from orchestrator.external.models import CustomMetric, ExternalRun
from orchestrator.runs.run_summary import RunSummary
from tests.external.conftest import post_rounds, run_client, user_client
from workers import heartbeat

pytestmark = pytest.mark.django_db


def test_create_report_finish(alice, run):
    pk, client = run
    experiment = Experiment.objects.get(pk=pk)
    assert (experiment.kind, experiment.status, experiment.spec) == (
        Kind.EXTERNAL,
        Status.RUNNING,
        {"lr": 0.1, "model": {"width": 8}},
    )
    r = post_rounds(
        client, pk,
        {"round": 1, "metrics": {"loss": 0.9, "accuracy": 0.5, "participants": 10, "bytes_up": 1000, "grad/norm": 3.5}},
        {"round": 2, "metrics": {"loss": 0.7, "accuracy": 0.6, "grad/norm": 2.5, "lr": 0.1}},
    )  # fmt: skip
    assert r.status_code == 201, r.content
    assert r.json() == {"recorded": [1, 2], "duplicates": []}
    row = RoundMetric.objects.get(experiment_id=pk, round=1)
    assert (row.train_loss, row.test_accuracy, row.participants, row.bytes_up) == (0.9, 0.5, 10, 1000)
    assert CustomMetric.objects.get(experiment_id=pk, round=2).values == {"grad/norm": 2.5, "lr": 0.1}
    assert Experiment.objects.get(pk=pk).current_round == 2
    # the user API reads its rounds like a native run's
    assert [x["round"] for x in alice.get(f"/api/experiments/{pk}/rounds/").json()] == [1, 2]
    assert client.post(f"/api/external/runs/{pk}/finish/").json() == {"id": pk, "status": "completed"}
    assert post_rounds(client, pk, {"round": 3, "metrics": {"loss": 1}}).status_code == 409
    # a retry whose answer was lost is still answered after the end
    resend = {"round": 2, "metrics": {"loss": 0.7, "accuracy": 0.6, "grad/norm": 2.5, "lr": 0.1}}
    assert post_rounds(client, pk, resend).json() == {"recorded": [], "duplicates": [2]}


def test_every_declared_round_number_fills_its_column(run):
    # Read from the declaration, not from ingest: a field declared in round_fields.py that ingest did
    # not know would land among the custom metrics and fail here.
    numbers = [f for f in round_fields.FIELDS if f.type in (int, float) and f.name != "round"]
    metrics = {f.name: 7 if f.type is int else 0.25 for f in numbers}
    pk, client = run
    assert post_rounds(client, pk, {"round": 1, "metrics": metrics}).status_code == 201
    row = RoundMetric.objects.get(experiment_id=pk, round=1)
    assert {name: getattr(row, name) for name in metrics} == metrics
    assert not CustomMetric.objects.filter(experiment_id=pk).exists()
    # and a resend of the same values is a duplicate, not a conflict (every field is compared)
    assert post_rounds(client, pk, {"round": 1, "metrics": metrics}).json() == {"recorded": [], "duplicates": [1]}


def test_resend_is_not_a_duplicate_and_changes_conflict(run):
    pk, client = run
    item = {"round": 1, "metrics": {"loss": 0.5, "x": 1}}
    assert post_rounds(client, pk, item).status_code == 201
    again = post_rounds(client, pk, item, {"round": 2, "metrics": {"loss": 0.4}})
    assert again.status_code == 201 and again.json() == {"recorded": [2], "duplicates": [1]}
    assert post_rounds(client, pk, item).json() == {"recorded": [], "duplicates": [1]}
    changed = post_rounds(client, pk, {"round": 1, "metrics": {"loss": 0.6, "x": 1}})
    assert changed.status_code == 409 and "already recorded" in changed.json()["detail"]
    assert RoundMetric.objects.filter(experiment_id=pk).count() == 2


def test_rounds_going_backwards_conflict(run):
    pk, client = run
    assert post_rounds(client, pk, {"round": 5, "metrics": {"loss": 0.5}}).status_code == 201
    r = post_rounds(client, pk, {"round": 3, "metrics": {"loss": 0.5}})
    assert r.status_code == 409 and "backwards" in r.json()["detail"]
    r = post_rounds(client, pk, {"round": 7, "metrics": {}}, {"round": 6, "metrics": {}})
    assert r.status_code == 400 and "rounds" in r.json()
    assert list(RoundMetric.objects.filter(experiment_id=pk).values_list("round", flat=True)) == [5]


def test_run_token_is_scoped_to_its_run(alice, run):
    pk, client = run
    other = alice.post("/api/external/runs/", {"name": "other"}, format="json").json()["id"]
    assert post_rounds(client, other, {"round": 1, "metrics": {}}).status_code == 404
    assert client.get("/api/experiments/").status_code == 401
    assert client.get(f"/api/experiments/{pk}/").status_code == 401
    assert client.post("/api/external/runs/", {"name": "x"}, format="json").status_code == 401
    assert client.post(f"/api/external/runs/{other}/finish/").status_code == 404
    # a user token is not a run token
    assert alice.post(f"/api/external/runs/{pk}/rounds/", {"rounds": []}, format="json").status_code in (401, 403)
    assert not RoundMetric.objects.exists()


def test_revoked_and_expired_tokens(alice, run):
    pk, client = run
    bob = user_client("bob")
    assert bob.post(f"/api/external/runs/{pk}/revoke/").status_code == 404
    assert alice.post(f"/api/external/runs/{pk}/revoke/").status_code == 200
    r = post_rounds(client, pk, {"round": 1, "metrics": {}})
    assert r.status_code == 401 and "revoked" in r.json()["detail"]
    created = alice.post("/api/external/runs/", {"name": "e"}, format="json").json()
    ExternalRun.objects.filter(experiment_id=created["id"]).update(expires=timezone.now() - timedelta(seconds=1))
    r = post_rounds(run_client(created["token"]), created["id"], {"round": 1, "metrics": {}})
    assert r.status_code == 401 and "expired" in r.json()["detail"]
    assert not RoundMetric.objects.exists()


@override_settings(FEDWEB_EXTERNAL_RATE=3)
def test_rate_limited_per_token(alice, run):
    pk, client = run
    codes = [post_rounds(client, pk, {"round": n, "metrics": {}}).status_code for n in range(1, 6)]
    assert codes[:3] == [201, 201, 201] and codes[3] == 429
    r = post_rounds(client, pk, {"round": 9, "metrics": {}})
    assert r.status_code == 429 and int(r["Retry-After"]) > 0
    # another run's token has its own budget
    created = alice.post("/api/external/runs/", {"name": "e"}, format="json").json()
    assert post_rounds(run_client(created["token"]), created["id"], {"round": 1, "metrics": {}}).status_code == 201


@override_settings(FEDWEB_EXTERNAL_CRASH_AFTER=60)
def test_silent_run_crashes_and_a_report_revives_it(run):
    pk, client = run
    ExternalRun.objects.filter(experiment_id=pk).update(last_report=timezone.now() - timedelta(seconds=61))
    assert mark_crashed() == [pk]
    assert Experiment.objects.get(pk=pk).status == Status.CRASHED
    assert post_rounds(client, pk, {"round": 1, "metrics": {"loss": 1.0}}).status_code == 201
    assert Experiment.objects.get(pk=pk).status == Status.RUNNING
    assert mark_crashed() == []


@override_settings(FEDWEB_EXTERNAL_CRASH_AFTER=60)
def test_a_worker_s_heartbeat_marks_a_silent_run_crashed_with_no_page_open(run):
    pk, _ = run
    heartbeat.beat("w@host", "cpu")
    assert Experiment.objects.get(pk=pk).status == Status.RUNNING
    ExternalRun.objects.filter(experiment_id=pk).update(last_report=timezone.now() - timedelta(seconds=61))
    heartbeat.beat("w@host", "cpu")
    assert Experiment.objects.get(pk=pk).status == Status.CRASHED


def test_external_runs_are_never_scheduled(run):
    pk, _ = run
    experiment = Experiment.objects.get(pk=pk)
    assert not experiment.start() and not experiment.pause() and not experiment.resume()
    assert experiment.queue == "inline" and experiment.dispatched_round == 0


@override_settings(FEDWEB_EXTERNAL_MAX_METRICS=3)
def test_custom_metric_names_are_bounded_per_run(run):
    pk, client = run
    assert post_rounds(client, pk, {"round": 1, "metrics": {"a": 1, "b": 2}}).status_code == 201
    r = post_rounds(client, pk, {"round": 2, "metrics": {"c": 1, "d": 2}})
    assert r.status_code == 400 and "metrics" in r.json()
    assert not RoundMetric.objects.filter(experiment_id=pk, round=2).exists()


@override_settings(FEDWEB_EXTERNAL_MAX_METRICS=3)
def test_names_of_any_earlier_round_count_toward_the_bound(run):
    pk, client = run
    codes = [
        post_rounds(client, pk, {"round": n, "metrics": metrics}).status_code
        for n, metrics in enumerate(({"a": 1, "b": 2}, {"c": 1}, {"c": 2}, {"a": 3}), start=1)
    ]
    assert codes == [201, 201, 201, 201]  # a, b, c: three names, whichever rounds bring them back
    r = post_rounds(client, pk, {"round": 5, "metrics": {"c": 1, "d": 2}})  # d is a fourth (a, b: rounds 1, 4)
    assert r.status_code == 400 and "makes 4" in r.json()["metrics"][0], r.content


def test_a_number_a_run_does_not_report_is_absent_not_zero(run):
    # A script that logs no bytes or memory: those columns stay null, so the charts draw no point
    # and the summaries (list, compare) show "–" instead of a false 0.
    pk, client = run
    r = post_rounds(client, pk, {"round": 1, "metrics": {"loss": 0.5}}, {"round": 2, "metrics": {"loss": 0.4}})
    assert r.status_code == 201, r.content
    row = RoundMetric.objects.get(experiment_id=pk, round=1)
    unreported = ("bytes_up", "bytes_down", "rss_mb", "participants", "round_seconds", "samples", "threads")
    assert {name: getattr(row, name) for name in unreported} == dict.fromkeys(unreported, None)
    assert (row.train_loss, row.device) == (0.5, "external")
    rounds = [m.to_result_dict() for m in RoundMetric.objects.filter(experiment_id=pk)]
    assert round_fields.Formula(("bytes_up", "bytes_down")).points(rounds) == ([], [])  # no point on a chart
    from_rows, in_sql = summaries.summarize(rounds), RunSummary.objects.get(pk=pk).state()
    assert (from_rows["bytes"], from_rows["seconds"], from_rows["rounds"]) == (None, None, 2), from_rows
    assert (in_sql["bytes"], in_sql["seconds"], in_sql["rounds"]) == (None, None, 2), in_sql
    # a resend of a round with the same (partial) metrics is still a duplicate
    assert post_rounds(client, pk, {"round": 2, "metrics": {"loss": 0.4}}).json() == {"recorded": [], "duplicates": [2]}
