"""``GET /api/experiments/`` as the runs table (orchestrator/api/runs.py): the page's query, columns,
sort and grouping, in pages; hostile parameters get a 400 naming the problem, never a 5xx; and
``PATCH`` of a run's words, recorded with who and when."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from orchestrator.models import Experiment, RunEdit

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_it_pages_the_table_with_the_requested_columns(runs):
    api = client_for(runs.alice)
    first = api.get(
        "/api/experiments/?q=kind = native&columns=local.lr,algorithm.client.name,mb&sort=local.lr&page_size=3"
    )
    body = first.json()
    assert (
        first.status_code == 200
        and body["count"] == 4
        and body["columns"] == ["local.lr", "algorithm.client.name", "mb"]
    )
    assert [r["name"] for r in body["results"]] == ["scaffold lr0.01", "scaffold lr0.1", "fedavg lr0.1"]
    assert body["results"][1]["values"] == {"local.lr": 0.1, "algorithm.client.name": "scaffold", "mb": 0.024}
    assert body["previous"] is None and "page=2" in body["next"]
    second = api.get(body["next"]).json()
    assert [r["name"] for r in second["results"]] == ["bob shared"] and second["next"] is None
    assert "page=1" in second["previous"]


def test_it_groups_over_the_api(runs):
    body = client_for(runs.alice).get("/api/experiments/?group=algorithm.client.name&columns=best_accuracy").json()
    scaffold = next(g for g in body["results"] if g["key"] == {"algorithm.client.name": "scaffold"})
    assert (scaffold["runs"], scaffold["completed"]) == (3, 2)
    assert scaffold["values"]["best_accuracy"]["mean"] == pytest.approx(0.86) and body["group"] == [
        "algorithm.client.name"
    ]


HOSTILE = {
    "q": [
        "x" * 10_240,
        "(" * 40 + "a = 1" + ")" * 40,
        "not " * 30 + "status = completed",
        "local.lrr > 0.05",
        "name = 'x'; DROP TABLE orchestrator_experiment; --",
        "1 OR 1=1",
        "status => completed",
        "名前 = 試験 ∧ ☃ > 1",
        "name = a\x00b",
        'tag:"unterminated',
        "created > 99999999d",
        "best_accuracy > 1e400",
        "custom.x.y.z > 1",
    ],
    "columns": ["local.lrr", "a" * 5000, ",".join(f"c{i}" for i in range(100)), "name;DROP"],
    "group": ["tag", "name,status,owner", "local.lrr"],
    "sort": ["-local.lrr", "--", "1; DROP TABLE x"],
    "target": ["high", "nan", "inf", "2", "-0.1", "1e999"],
    "page_size": ["0", "100000", "x"],
    "page": ["0", "-1", "1e3", "99999999999999999999"],
}


def test_hostile_parameters_get_a_400_naming_the_parameter_never_a_5xx(runs, client):
    client.force_login(runs.alice)
    for param, values in HOSTILE.items():
        for value in values:
            _check_refused(client_for(runs.alice), client, param, value)


def _check_refused(api, client, param: str, value: str) -> None:
    response = api.get("/api/experiments/", {param: value})
    if param == "q" and value.startswith("name = 'x'"):  # 'x' quoted, then words of free text: valid, and empty
        assert response.status_code == 200 and response.json()["count"] == 0
        return
    assert response.status_code == 400, (param, value, response.content[:300])
    assert list(response.json()) == [param], response.json()
    name = "per_page" if param == "page_size" else param  # the page and the CSV refuse it alike
    page = client.get("/", {name: value})
    assert page.status_code == 400 and f"<b>{name}</b>" in page.content.decode(), (param, value)
    if param not in ("page", "page_size"):  # the CSV has every row: it takes no page
        download = client.get("/runs.csv", {param: value})
        assert download.status_code == 400 and download.content.decode().startswith(f"{param}: "), (param, value)
    assert Experiment.objects.count() == 8


def test_errors_name_the_field_or_operator_and_the_nearest_name(runs):
    api = client_for(runs.alice)
    assert api.get("/api/experiments/?q=local.lrr > 0.05").json() == {
        "q": ['unknown field "local.lrr"; did you mean "local.lr"? (at character 1)']
    }
    assert api.get("/api/experiments/?columns=best_acc").json() == {
        "columns": ['unknown field "best_acc"; did you mean "best_accuracy"?']
    }
    assert 'did you mean ">="?' in api.get("/api/experiments/?q=status => 1").json()["q"][0]
    assert "nests too deeply" in api.get("/api/experiments/", {"q": "(" * 20 + "a=1" + ")" * 20}).json()["q"][0]


def test_patch_changes_a_run_s_words_and_records_each_change(runs):
    api = client_for(runs.alice)
    body = {"name": "renamed", "tags": ["a", " b ", "a"], "notes": "# Why\n*lr* too high", "description": "d"}
    response = api.patch(f"/api/experiments/{runs.r1.pk}/", body, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["name"], response.json()["tags"], response.json()["notes"]) == (
        "renamed",
        ["a", "b"],
        body["notes"],
    )
    edits = {e.field: (e.username, e.old, e.new) for e in RunEdit.objects.filter(experiment=runs.r1)}
    assert edits == {"name": ("alice", "fedavg lr0.1", "renamed"), "tags": ("alice", ["baseline"], ["a", "b"]),
                     "notes": ("alice", "", body["notes"]), "description": ("alice", "", "d")}  # fmt: skip
    assert api.patch(f"/api/experiments/{runs.r1.pk}/", {"name": "renamed"}, format="json").status_code == 200
    assert RunEdit.objects.filter(experiment=runs.r1).count() == 4  # an unchanged value records nothing


@pytest.mark.parametrize(
    "body, field",
    [
        ({"tags": [f"t{i}" for i in range(21)]}, "tags"),
        ({"tags": "a,b"}, "tags"),
        ({"tags": ["x" * 51]}, "tags"),
        ({"name": "  "}, "name"),
        ({"name": "a\x1b[2Jb"}, "name"),
        ({"name": "a\x00b"}, "detail"),  # JSON text cannot hold NUL: the parser refuses it first
        ({"notes": "x" * 50_001}, "notes"),
        ({"description": 5}, "description"),
        ({"status": "completed"}, "status"),
        ({"name": "ok", "tags": ["a,b"]}, "tags"),  # one bad field: nothing is changed
    ],
)
def test_patch_refuses_bad_words_naming_the_field_and_changes_nothing(runs, body, field):
    response = client_for(runs.alice).patch(f"/api/experiments/{runs.r1.pk}/", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    runs.r1.refresh_from_db()
    assert (runs.r1.name, runs.r1.tags, runs.r1.notes) == ("fedavg lr0.1", ["baseline"], "")
    assert not RunEdit.objects.exists()


def test_patch_is_for_those_who_may_change_the_run(runs):
    from accounts.models import Role

    viewer = type(runs.alice).objects.create_user("vic", password="pw")
    runs.vision.add_member(viewer, Role.VIEWER)
    assert client_for(viewer).patch(f"/api/experiments/{runs.r4.pk}/", {"name": "x"}, format="json").status_code == 403
    assert (
        client_for(runs.carol).patch(f"/api/experiments/{runs.r4.pk}/", {"name": "x"}, format="json").status_code == 404
    )
    assert (
        client_for(runs.alice).patch(f"/api/experiments/{runs.r4.pk}/", {"name": "x"}, format="json").status_code == 200
    )
    assert RunEdit.objects.get().username == "alice"
