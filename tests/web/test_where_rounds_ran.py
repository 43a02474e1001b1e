"""Where each round ran: the dashboard's rounds table and downloads, and the Workers page's recent
rounds and switches, for those who may see the experiment only."""

from __future__ import annotations

import csv
import io

import pytest

from orchestrator.models import Experiment, RoundMetric
from tests.factories import round_result
from tests.web.conftest import make_experiment

pytestmark = pytest.mark.django_db


def _record(experiment: Experiment, hosts: list[str]) -> None:
    """Rounds 1..len(hosts), round n recorded by hosts[n-1] (the claimant RoundMetric.record reads)."""
    for n, host in enumerate(hosts, start=1):
        experiment.worker = host
        RoundMetric.record(experiment, round_result(n))


def test_it_shows_the_worker_of_each_round_on_the_dashboard(alice_client, user):
    experiment = make_experiment(user, name="where")
    _record(experiment, ["w1@box", "w1@box", "w2@box"])
    html = alice_client.get(f"/experiments/{experiment.pk}/").content.decode()
    table = html.split('id="rounds-table"', 1)[1].split("</table>", 1)[0]
    assert '<th class="num">Worker</th>' in table and table.count("w1@box") == 2 and table.count("w2@box") == 1
    rows = list(
        csv.DictReader(io.StringIO(alice_client.get(f"/experiments/{experiment.pk}/rounds.csv").content.decode()))
    )
    assert [r["worker"] for r in rows] == ["w1@box", "w1@box", "w2@box"]
    body = alice_client.get(f"/experiments/{experiment.pk}/rounds.json").json()
    assert [r["worker"] for r in body["rounds"]] == ["w1@box", "w1@box", "w2@box"]


def test_it_shows_recent_rounds_and_switches_per_worker(alice_client, user):
    a, b = make_experiment(user, name="exp-a"), make_experiment(user, name="exp-b")
    _record(a, ["w1@box", "w1@box", "w2@box", "w2@box"])  # one switch, at round 3, onto w2
    _record(b, ["w2@box", "w1@box"])  # one switch, at round 2, onto w1
    html = alice_client.get("/workers/").content.decode()
    section = html.split('id="recent-rounds"', 1)[1].split("</table>", 1)[0]
    assert "exp-a</a> · 2 rounds (r1–r2)" in section and "exp-b</a> r2 from <code>w2@box</code>" in section
    recent = {w["hostname"]: w for w in alice_client.get("/workers.json").json()["recent_rounds"]}
    assert (recent["w1@box"]["rounds"], recent["w1@box"]["switches"]) == (3, 1)
    assert (recent["w2@box"]["rounds"], recent["w2@box"]["switches"]) == (3, 1)
    assert recent["w2@box"]["last_switches"] == [{"id": a.pk, "name": "exp-a", "round": 3, "from": "w1@box"}]


def test_it_hides_the_rounds_of_experiments_the_viewer_may_not_see(client, user, other_user):
    mine, theirs = make_experiment(user, name="mine"), make_experiment(other_user, name="secret-run")
    _record(mine, ["w1@box"])
    _record(theirs, ["w1@box", "w9@box"])
    client.force_login(user)
    html = client.get("/workers/").content.decode()
    assert "secret-run" not in html and "w9@box" not in html
    recent = client.get("/workers.json").json()["recent_rounds"]
    assert [(w["hostname"], w["rounds"], w["switches"]) for w in recent] == [("w1@box", 1, 0)]


def test_the_workers_page_shows_a_gang_and_its_ranks_naming_the_run_only_to_its_readers(alice_client, user, other_user):
    from django.test import Client

    from orchestrator.models import Gang, Worker

    experiment = make_experiment(user, name="ranked run")
    for host in ("w1@box", "w2@box", "w3@box"):
        Worker.objects.create(hostname=host, queue="cpu")
    Gang.objects.create(experiment=experiment, leader="w1@box", members=["w2@box", "w3@box"], address="10.0.0.1:1")
    html = alice_client.get("/workers/").content.decode()
    gangs = html.split('id="gangs"', 1)[1].split("</table>", 1)[0]
    assert (
        "ranked run" in gangs and "<code>w1@box</code>" in gangs and "<code>w2@box</code>, <code>w3@box</code>" in gangs
    )
    workers = html.split('id="workers"', 1)[1].split("</table>", 1)[0]
    assert "rank 0 of 3" in workers and "rank 2 of 3" in workers
    body = alice_client.get("/workers.json").json()
    assert {w["hostname"]: (w["gang"] or {}).get("rank") for w in body["workers"]} == {
        "w1@box": 0,
        "w2@box": 1,
        "w3@box": 2,
    }
    client = Client()
    client.force_login(other_user)  # may not read the run: sees the gang, not which run it holds
    gangs = client.get("/workers/").content.decode().split('id="gangs"', 1)[1].split("</table>", 1)[0]
    assert "ranked run" not in gangs and "(not visible to you)" in gangs
    assert client.get("/workers.json").json()["gangs"][0]["experiment"] is None
