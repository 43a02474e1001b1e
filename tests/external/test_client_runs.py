"""``fedweb_client.runs()`` against a real HTTP server (pytest-django's live server): the runs
table's query, columns, sort and grouping as rows, fetched page by page, and a refused query
raised with the server's words."""

from __future__ import annotations

import fedweb_client
import pytest
from rest_framework.authtoken.models import Token

from tests.runs.world import Runs

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(django_user_model) -> Runs:
    return Runs(django_user_model)


def test_it_returns_the_table_s_rows_page_by_page(live_server, world):
    token = Token.objects.create(user=world.alice).key
    rows = fedweb_client.runs("local.lr > 0.05", ["local.lr", "algorithm.client.name", "rounds_to_target"],
                              url=live_server.url, token=token, sort="rounds_to_target", page_size=2)  # fmt: skip
    assert [(r["name"], r["local.lr"], r["algorithm.client.name"], r["rounds_to_target"]) for r in rows] == [
        ("bob shared", 0.2, "scaffold", 1),
        ("scaffold lr0.1", 0.1, "scaffold", 2),
        ("fedavg lr0.1", 0.1, "fedavg", 3),
    ]  # fmt: skip  (two pages of two; carol's and bob's private runs are not alice's)
    assert set(rows[0]) == {
        "id",
        "name",
        "status",
        "owner",
        "created",
        "local.lr",
        "algorithm.client.name",
        "rounds_to_target",
    }
    assert len(fedweb_client.runs(url=live_server.url, token=token, limit=3, page_size=2)) == 3
    groups = fedweb_client.runs("kind = native", ["best_accuracy"], group=["algorithm.client.name"], url=live_server.url,
                                token=token)  # fmt: skip
    scaffold = next(g for g in groups if g["algorithm.client.name"] == "scaffold")
    assert (scaffold["runs"], scaffold["completed"]) == (3, 2) and scaffold["best_accuracy mean"] == pytest.approx(0.86)


def test_a_refused_query_raises_with_the_server_s_message(live_server, world, monkeypatch):
    monkeypatch.setenv("FEDWEB_URL", live_server.url)
    monkeypatch.setenv("FEDWEB_TOKEN", Token.objects.create(user=world.alice).key)
    with pytest.raises(fedweb_client.QueryError) as e:
        fedweb_client.runs("local.lrr > 0.05")
    assert e.value.errors == {"q": ['unknown field "local.lrr"; did you mean "local.lr"? (at character 1)']}
    with pytest.raises(
        fedweb_client.QueryError, match='columns: unknown field "best_acc"; did you mean "best_accuracy"?'
    ):
        fedweb_client.runs(columns=["best_acc"])
