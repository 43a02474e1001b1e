"""The runs table page (orchestrator/web/views/runs.py, saved_views.py, words.py): columns kept per
user, saved views shared with a team, the CSV of the current view, a run's words and Markdown notes
edited on its dashboard; with two teams, no filter, view, link or download shows a run its reader
may not see."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db import connection
from django.test import Client

from orchestrator.models import RunEdit, SavedView, TablePrefs

pytestmark = pytest.mark.django_db


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def rows(response) -> list[str]:
    return re.findall(r'<td class="run-name"><a href="/experiments/\d+/">([^<]*)</a>', response.content.decode())


def headers(response) -> list[str]:
    return re.findall(r'<th class="[^"]*" data-col="([^"]+)"', response.content.decode())


def csv_rows(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_chosen_columns_are_kept_for_the_user_and_shown_next_time(runs):
    alice = signed_in(runs.alice)
    response = alice.post(
        "/runs/columns/", {"columns": "local.lr,algorithm.client.name,best_accuracy", "q": "tag:baseline"}
    )
    assert (
        response.status_code == 302
        and "columns=local.lr%2Calgorithm.client.name%2Cbest_accuracy" in response["Location"]
    )
    assert TablePrefs.objects.get(user=runs.alice).columns == ["local.lr", "algorithm.client.name", "best_accuracy"]
    assert headers(alice.get("/")) == ["local.lr", "algorithm.client.name", "best_accuracy"]  # no parameter: hers
    assert headers(signed_in(runs.bob).get("/"))[:2] == ["status", "round"]  # bob's are still the defaults
    refused = alice.post("/runs/columns/", {"columns": "local.lrr"})
    assert refused.status_code == 302 and TablePrefs.objects.get(user=runs.alice).columns[0] == "local.lr"
    assert "did you mean &quot;local.lr&quot;" in alice.get(refused["Location"]).content.decode()


def test_a_view_saved_and_shared_with_a_team_opens_for_its_members_with_their_own_runs(runs):
    bob = signed_in(runs.bob)
    saved = bob.post("/views/save/", {"name": "baselines", "team": runs.vision.pk, "q": "tag:baseline or owner = bob",
                                      "columns": "local.lr,best_accuracy", "group": "", "sort": "-best_accuracy",
                                      "target": "0.85"})  # fmt: skip
    view = SavedView.objects.get()
    assert saved.status_code == 302 and (view.owner, view.team, view.sort, view.target) == (
        runs.bob,
        runs.vision,
        "-best_accuracy",
        0.85,
    )
    assert rows(bob.get(saved["Location"])) == ["bob private", "bob shared"]  # bob reads his private run
    alice = signed_in(runs.alice)
    assert f'href="/views/{view.pk}/"' in alice.get("/").content.decode()  # in her menu: shared with Vision
    opened = alice.get(f"/views/{view.pk}/")
    assert (
        opened.status_code == 302
        and "sort=-best_accuracy" in opened["Location"]
        and "target=0.85" in opened["Location"]
    )
    page = alice.get(opened["Location"])
    assert rows(page) == ["bob shared", "fedavg lr0.1"] and headers(page) == ["local.lr", "best_accuracy"]
    # carol (team Audio) sees neither the view nor, through any link, a run of Vision's
    carol = signed_in(runs.carol)
    assert carol.get(f"/views/{view.pk}/").status_code == 404
    assert rows(carol.get(opened["Location"])) == ["carol audio"]
    assert f"/views/{view.pk}/" not in carol.get("/").content.decode()
    # only its owner changes it
    assert alice.post(f"/views/{view.pk}/delete/").status_code == 404 and SavedView.objects.exists()
    assert bob.post(f"/views/{view.pk}/delete/").status_code == 302 and not SavedView.objects.exists()


def test_a_view_cannot_be_shared_with_a_team_one_is_not_in(runs):
    alice = signed_in(runs.alice)
    alice.post("/views/save/", {"name": "sneaky", "team": runs.audio.pk, "q": ""})
    assert not SavedView.objects.exists()
    alice.post("/views/save/", {"name": "bad", "q": "local.lrr > 1"})
    assert not SavedView.objects.exists()


def test_filters_groups_links_and_downloads_never_show_another_team_s_runs(runs):
    alice = signed_in(runs.alice)
    hidden = ("carol audio", "carol script", "bob private")
    for q in ("", "tag:baseline", "owner = carol", "team = Audio", "best_accuracy > 0.9", "local.lr >= 0.3", "carol"):
        page = alice.get("/", {"q": q, "columns": "local.lr"})
        assert not set(rows(page)) & set(hidden), q
        names = [r[1] for r in csv_rows(alice.get("/runs.csv", {"q": q}))[1:]]
        assert not set(names) & set(hidden), q
        api = alice.get("/api/experiments/", {"q": q}).json()["results"]
        assert not {r["name"] for r in api} & set(hidden), q
    grouped = csv_rows(alice.get("/runs.csv", {"group": "local.lr", "columns": "best_accuracy"}))
    assert [r[:2] for r in grouped[1:]] == [["0.01", "1"], ["0.1", "2"], ["0.2", "1"], ["fast", "1"]]  # no 0.3 (theirs)
    compare = alice.get("/compare/", {"q": "tag:baseline or owner = carol"}).content.decode()
    assert "carol" not in compare and "bob private" not in compare
    opened = alice.get("/", {"q": "owner = bob", "partial": "rows"})
    assert rows(opened) == ["bob shared"]


def test_the_csv_is_the_view_as_shown_its_columns_filter_and_sort(runs):
    lines = csv_rows(signed_in(runs.alice).get("/runs.csv", {"q": "kind = native", "columns": "local.lr,mb,rounds_to_target",
                                                             "sort": "local.lr", "target": "0.8"}))  # fmt: skip
    assert lines[0] == ["id", "name", "local.lr", "mb", "rounds_to_target"]
    assert [line[1:] for line in lines[1:]] == [["scaffold lr0.01", "0.01", "0.016", ""], ["scaffold lr0.1", "0.1", "0.024", "2"],
                                                ["fedavg lr0.1", "0.1", "0.032", "3"], ["bob shared", "0.2", "0.008", "1"]]  # fmt: skip


def test_a_grouped_page_shows_each_group_s_count_and_mean_with_a_link_to_its_runs(runs):
    page = signed_in(runs.alice).get("/", {"group": "algorithm.client.name", "columns": "best_accuracy"})
    html = page.content.decode()
    assert page.status_code == 200 and "2/3" in html and "0.8600 ± 0.0566" in html
    drill = re.search(r'data-drill="([^"]*scaffold[^"]*)"', html).group(1).replace("&amp;", "&")
    assert rows(signed_in(runs.alice).get("/?" + drill)) == ["bob shared", "scaffold lr0.01", "scaffold lr0.1"]


def test_a_run_s_words_are_edited_on_its_dashboard_and_each_edit_is_recorded(runs):
    alice = signed_in(runs.alice)
    url = f"/experiments/{runs.r1.pk}/"
    notes = "## Why\nThe *lr* was too high.\n\n<script>alert(1)</script> [x](javascript:alert(2)) <img src=x onerror=alert(3)>"
    saved = alice.post(
        f"{url}words/",
        {"name": "fedavg (lr 0.1)", "description": "first", "tags": "baseline, lr-sweep", "notes": notes},
    )
    assert saved.status_code == 302
    html = alice.get(url).content.decode()
    assert "<h2>Why</h2>" in html and "<em>lr</em>" in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert(1)" not in html and 'href="javascript' not in html and "<img" not in html
    assert "<b>alice</b> changed <b>tags</b>: baseline → baseline, lr-sweep" in html
    assert {e.field for e in RunEdit.objects.filter(experiment=runs.r1)} == {"name", "description", "tags", "notes"}
    report = alice.get(f"{url}report.html").content.decode()
    assert "<h2>Why</h2>" in report and "<script>alert(1)" not in report
    # A refused edit keeps what was typed, says why, and changes nothing.
    long_notes = "kept text " * 10
    refused = alice.post(f"{url}words/", {"name": "x", "tags": "a" * 60, "notes": long_notes})
    assert (
        refused.status_code == 400
        and long_notes.strip() in refused.content.decode()
        and "at most 50" in refused.content.decode()
    )
    runs.r1.refresh_from_db()
    assert (runs.r1.name, runs.r1.tags) == ("fedavg (lr 0.1)", ["baseline", "lr-sweep"])


def test_words_are_for_those_who_may_change_the_run(runs):
    from accounts.models import Role

    viewer = type(runs.alice).objects.create_user("vic", password="pw")
    runs.vision.add_member(viewer, Role.VIEWER)
    url = f"/experiments/{runs.r4.pk}/words/"
    assert signed_in(viewer).post(url, {"name": "x"}).status_code == 403
    assert signed_in(runs.carol).post(url, {"name": "x"}).status_code == 404
    assert "words-form" not in signed_in(viewer).get(f"/experiments/{runs.r4.pk}/").content.decode()
    assert signed_in(runs.alice).post(url, {"name": "renamed by alice"}).status_code == 302
    assert not RunEdit.objects.exclude(username="alice").exists()


def test_the_compare_page_takes_a_query_and_follows_the_table_s_grouping(runs):
    html = (
        signed_in(runs.alice)
        .get("/compare/", {"q": "kind = native", "group": "algorithm.client.name"})
        .content.decode()
    )
    assert "Grouped by" in html and 'id="groups"' in html
    groups = dict(re.findall(r"<tr><td>([^<]*)</td><td>((?:#\d+ )+)", html))
    ids = lambda *rs: "".join(f"#{r.pk} " for r in rs)  # noqa: E731
    assert groups == {
        "client=&quot;scaffold&quot;": ids(runs.r4, runs.r3, runs.r2),
        "client=&quot;fedavg&quot;": ids(runs.r1),
    }
    figures = re.search(r'<script id="charts-data" type="application/json">(.*?)</script>', html, re.S).group(1)
    assert figures.count('"role": "mean"') >= 2  # a band per group on the charts
    assert "carol" not in html and "bob private" not in html


def test_a_spec_filter_runs_in_the_database_and_loads_only_the_page_s_specs(runs):
    sent = []

    def capture(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    alice = signed_in(runs.alice)
    with connection.execute_wrapper(capture):
        page = alice.get("/", {"q": "local.lr > 0.05 and algorithm.client.name = scaffold", "per_page": "1"})
    assert rows(page) == ["bob shared"]  # one row of the two that match: the second page holds the other
    loads_specs = [sql for sql in sent if '"spec"' in sql.split(" FROM ")[0]]
    filters = [sql for sql in sent if "spec" in sql.split(" FROM ", 1)[-1] and "OVER ()" in sql]
    assert len(filters) == 1 and '"spec"' not in filters[0].split(" FROM ")[0]  # the filter reads specs in SQL
    for sql in loads_specs:  # the page's one row, or the vocabulary's newest external runs (at most 200)
        assert '"id" IN (' in sql or ('"kind" = ' in sql and "LIMIT 200" in sql), sql
