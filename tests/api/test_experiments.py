import csv
import io

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS
from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment, Status
from tests.accounts.world import PASSWORD, make_experiment, make_world, metrics
from tests.conftest import TINY_SPEC

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


@pytest.fixture
def api(world):
    """An API client authenticated as the experiment's owner with a token, as scripts would."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=world.owner).key}")
    return client


def _url(experiment, suffix=""):
    return f"/api/experiments/{experiment.pk}/{suffix}"


def test_it_issues_a_token_for_username_and_password(client, world):
    response = client.post("/api/token/", {"username": "olivia", "password": PASSWORD})
    assert response.status_code == 200 and response.json()["token"] == Token.objects.get(user=world.owner).key
    assert client.post("/api/token/", {"username": "olivia", "password": "wrong"}).status_code == 400


def test_it_answers_401_without_credentials(client, world):
    response = client.get("/api/experiments/")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


def test_it_creates_an_experiment_from_a_spec(api, world, enqueued):
    body = {"name": "api run", "description": "d", "tags": ["x"], "spec": {"rounds": 3, "compute": {"device": "cpu"}}}
    response = api.post("/api/experiments/", body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    experiment = Experiment.objects.get(pk=data["id"])
    assert experiment.owner == world.owner and experiment.status == Status.DRAFT and experiment.visibility == "private"
    assert data["spec"]["local"]["epochs"] == 1 and data["total_rounds"] == 3  # defaults filled in
    assert data["role"] == "owner" and data["can_control"] and data["can_delete"] and data["tags"] == ["x"]
    assert enqueued == []


def test_it_creates_and_starts_in_a_team(api, world, enqueued):
    body = {"name": "team run", "team": world.team.pk, "visibility": "team", "spec": TINY_SPEC, "start": True}
    response = api.post("/api/experiments/", body, format="json")
    assert response.status_code == 201, response.json()
    experiment = Experiment.objects.get(pk=response.json()["id"])
    assert experiment.team == world.team and experiment.status == Status.QUEUED
    assert enqueued == [((experiment.pk, 1), {"queue": "cpu"})]
    assert access.can_view(experiment, world.viewer) and not access.can_control(experiment, world.viewer)


def test_it_refuses_to_create_in_a_team_you_only_view(world):
    client = APIClient()
    client.force_authenticate(world.viewer)
    response = client.post("/api/experiments/", {"name": "n", "team": world.team.pk, "spec": TINY_SPEC}, format="json")
    assert response.status_code == 400 and "team" in response.json()
    client.force_authenticate(world.other)
    response = client.post("/api/experiments/", {"name": "n", "team": world.team.pk, "spec": TINY_SPEC}, format="json")
    assert response.status_code == 400 and "team" in response.json()
    assert Experiment.objects.count() == 1


def test_it_gives_public_experiments_a_share_link(api, world):
    response = api.post("/api/experiments/", {"name": "p", "visibility": "public", "spec": TINY_SPEC}, format="json")
    experiment = Experiment.objects.get(pk=response.json()["id"])
    assert len(experiment.share_token) >= 40
    assert response.json()["share_url"].endswith(f"{experiment.share_token}/")


def test_it_lists_visible_experiments_with_filters(api, world):
    mine = make_experiment(world.owner, name="private notes")
    theirs = make_experiment(world.member, team=world.team, visibility="team", name="member's run")
    hidden = make_experiment(world.member, team=world.team, visibility="private", name="member's secret")
    Experiment.objects.filter(pk=theirs.pk).update(status=Status.RUNNING, tags=["vision"])

    def ids(query=""):
        response = api.get(f"/api/experiments/{query}")
        assert response.status_code == 200
        return {row["id"] for row in response.json()["results"]}

    assert ids() == {mine.pk, theirs.pk, world.experiment.pk} and hidden.pk not in ids()
    assert ids("?scope=mine") == {mine.pk, world.experiment.pk}
    assert ids("?scope=team") == {theirs.pk, world.experiment.pk}
    assert ids("?scope=shared") == {world.experiment.pk}
    assert ids("?status=running") == {theirs.pk}
    assert ids("?q=NOTES") == {mine.pk}
    assert ids("?q=vision") == {theirs.pk}


def test_it_lists_in_a_constant_number_of_queries(api, world, django_assert_max_num_queries):
    for i in range(5):
        make_experiment(world.member, team=world.team, visibility="team", name=f"e{i}", rounds=0)
    # token user, the vocabulary's external runs, the count, the page's ids, its rows (+ team roles and
    # summaries): nothing per row
    with django_assert_max_num_queries(5):
        assert len(api.get("/api/experiments/").json()["results"]) == 6


def test_it_reads_an_experiment(api, world):
    data = api.get(_url(world.experiment)).json()
    assert data["id"] == world.experiment.pk and data["owner"] == "olivia" and data["team"] == world.team.pk
    assert data["current_round"] == 2 and data["visibility"] == "public"


def test_it_deletes_an_experiment(api, world):
    assert api.delete(_url(world.experiment)).status_code == 204
    assert not Experiment.objects.exists()
    assert api.get(_url(world.experiment)).status_code == 404


def test_it_starts_pauses_resumes_and_cancels(api, world, enqueued):
    experiment = make_experiment(world.owner, rounds=0)
    for action, expected in [("start", "queued"), ("pause", "paused"), ("resume", "queued"), ("cancel", "cancelled")]:
        response = api.post(_url(experiment, f"{action}/"))
        assert response.status_code == 200, (action, response.json())
        assert response.json()["status"] == expected
    assert len(enqueued) == 2  # start and resume


@pytest.mark.parametrize("action", ["start", "pause", "resume", "cancel"])
def test_it_answers_409_for_a_transition_the_status_forbids(api, world, action):
    Experiment.objects.filter(pk=world.experiment.pk).update(status=Status.COMPLETED)
    response = api.post(_url(world.experiment, f"{action}/"))
    assert response.status_code == 409
    assert response.json() == {"detail": f"Cannot {action} an experiment that is completed", "status": "completed"}


def test_it_returns_rounds_as_json_with_every_field(api, world):
    rows = api.get(_url(world.experiment, "rounds/")).json()
    assert rows == [metrics(1), metrics(2)]
    assert list(rows[0]) == list(ROUND_RESULT_FIELDS)
    assert api.get(_url(world.experiment, "rounds/?after=1")).json() == [metrics(2)]


def test_it_returns_rounds_as_csv(api, world):
    response = api.get(_url(world.experiment, "rounds.csv"), HTTP_ACCEPT="text/csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert len(rows) == 2 and list(rows[0]) == [*ROUND_RESULT_FIELDS, "worker"]  # and where it ran
    assert rows[1]["round"] == "2" and rows[1]["bytes_up"] == "5" and rows[1]["vram_peak_mb"] == ""


def test_it_lists_my_teams_with_my_role(api, world):
    assert api.get("/api/teams/").json() == [{"id": world.team.pk, "name": "Vision", "role": "member"}]


def test_it_accepts_session_authentication_too(client, world):
    client.force_login(world.viewer)
    assert client.get(_url(world.experiment)).json()["role"] == "viewer"
