"""The permission matrix (issue 4, acceptance item 2): every page, API endpoint and the WebSocket,
for every role, each (role, endpoint) its own test. Outcomes:

- ok: the role may do it (and the action took effect, for controls);
- login: anonymous pages redirect to the login page; the API answers 401; the socket closes 4403;
- hidden: 404 (or, for lists, the experiment is absent) so its existence doesn't leak;
- forbidden: 403, for those who may read the experiment but not do this.

The matrix experiment belongs to ``olivia`` (a member of team Vision), is shared with the team and
has a public link. Pages are named by URL name: a renamed or removed route fails its rows
(``reverse`` raises), it never skips them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.external.models import ExternalRun
from orchestrator.sockets.consumers import ExperimentConsumer
from orchestrator.sweeps.models import Sweep
from tests.accounts.world import fast_password_hashing, make_experiment, make_world  # noqa: F401
from tests.conftest import TINY_SPEC

ROLES = ["anonymous", "other", "viewer", "member", "team_owner", "owner", "public", "superuser"]
SIGNED_IN = {"other", "viewer", "member", "team_owner", "owner", "superuser"}
RIGHTS = {
    "anonymous": set(),
    "public": {"link"},  # holds the share token; signed out
    "other": {"login"},
    "viewer": {"login", "read"},
    "member": {"login", "read", "control"},
    "team_owner": {"login", "read", "control", "delete"},
    "owner": {"login", "read", "control", "delete"},
    "superuser": {"login", "read", "control", "delete"},
}


PRIORITY = 7  # what the priority endpoints set, where allowed
RENAMED = "renamed by a role"  # what the words endpoints set, where allowed


@dataclass(frozen=True)
class Endpoint:
    id: str
    kind: str  # page | api
    method: str
    target: str  # URL name (pages) or path template (api); {pk} {pk2} {token}
    needs: str  # any | login | read | control | delete
    link: bool = False  # the public link also opens it (read with ?token=)
    status: str | None = None  # the experiment's status before the request
    after: str | None = None  # its status afterwards, when the request is allowed ("deleted")
    lists: bool = False  # a list of experiments: "hidden" means absent from it, not 404


PAGES = [
    Endpoint("experiment_list", "page", "get", "experiment_list", "login", lists=True),
    Endpoint("experiment_new", "page", "get", "experiment_new", "login"),
    Endpoint("experiment_detail", "page", "get", "experiment_detail", "read"),
    Endpoint("experiment_pause", "page", "post", "experiment_pause", "control", status="running", after="paused"),
    Endpoint("experiment_resume", "page", "post", "experiment_resume", "control", status="paused", after="queued"),
    Endpoint("experiment_cancel", "page", "post", "experiment_cancel", "control", status="running", after="cancelled"),
    Endpoint("experiment_delete", "page", "post", "experiment_delete", "delete", after="deleted"),
    Endpoint("experiment_priority", "page", "post", "experiment_priority", "control", after="prioritised"),
    Endpoint("experiment_words", "page", "post", "experiment_words", "control", after="renamed"),
    Endpoint("runs_csv", "page", "get", "runs_csv", "login", lists=True),
    Endpoint("experiment_rounds_csv", "page", "get", "experiment_rounds_csv", "read", link=True),
    Endpoint("experiment_rounds_json", "page", "get", "experiment_rounds_json", "read", link=True),
    Endpoint("experiment_report", "page", "get", "experiment_report", "read", link=True),
    Endpoint("experiment_compare", "page", "get", "experiment_compare", "read", lists=True),
    Endpoint("worker_list", "page", "get", "worker_list", "login"),
    Endpoint("experiment_shared", "page", "get", "experiment_shared", "any"),
    Endpoint("experiment_sharing", "page", "get", "experiment_sharing", "delete"),
    Endpoint("experiment_sharing_revoke", "page", "post", "experiment_sharing", "delete", after="revoked"),
    # The matrix experiment is a run of the matrix sweep (shared with the team, no public link).
    Endpoint("sweep_list", "page", "get", "sweep_list", "login", lists=True),
    Endpoint("sweep_new", "page", "get", "sweep_new", "login"),
    Endpoint("sweep_detail", "page", "get", "sweep_detail", "read"),
    Endpoint("sweep_cancel", "page", "post", "sweep_cancel", "control", status="running", after="cancelled"),
    Endpoint("sweep_delete", "page", "post", "sweep_delete", "delete", after="deleted"),
]
API = [
    Endpoint("api_list", "api", "get", "/api/experiments/", "login", lists=True),
    Endpoint("api_create", "api", "post", "/api/experiments/", "login", after="created"),
    Endpoint("api_detail", "api", "get", "/api/experiments/{pk}/", "read"),
    Endpoint("api_delete", "api", "delete", "/api/experiments/{pk}/", "delete", after="deleted"),
    Endpoint("api_words", "api", "patch", "/api/experiments/{pk}/", "control", after="renamed"),
    Endpoint("api_start", "api", "post", "/api/experiments/{pk}/start/", "control", status="draft", after="queued"),
    Endpoint("api_pause", "api", "post", "/api/experiments/{pk}/pause/", "control", status="running", after="paused"),
    Endpoint("api_resume", "api", "post", "/api/experiments/{pk}/resume/", "control", status="paused", after="queued"),
    Endpoint(
        "api_cancel", "api", "post", "/api/experiments/{pk}/cancel/", "control", status="running", after="cancelled"
    ),  # fmt: skip
    Endpoint("api_priority", "api", "post", "/api/experiments/{pk}/priority/", "control", after="prioritised"),
    Endpoint("api_rounds", "api", "get", "/api/experiments/{pk}/rounds/", "read"),
    Endpoint("api_rounds_csv", "api", "get", "/api/experiments/{pk}/rounds.csv", "read"),
    Endpoint("api_teams", "api", "get", "/api/teams/", "login"),
    Endpoint("api_schema", "api", "get", "/api/schema/", "any"),
    Endpoint("api_sweeps", "api", "get", "/api/sweeps/", "login", lists=True),
    Endpoint("api_sweep_create", "api", "post", "/api/sweeps/", "login", after="created"),
    Endpoint("api_sweep", "api", "get", "/api/sweeps/{sweep}/", "read"),
    Endpoint("api_sweep_delete", "api", "delete", "/api/sweeps/{sweep}/", "delete", after="deleted"),
    Endpoint(
        "api_sweep_cancel", "api", "post", "/api/sweeps/{sweep}/cancel/", "control", status="running", after="cancelled"
    ),  # fmt: skip
    # External runs (orchestrator/external): creating one takes a user token; writing one takes its
    # run token, which no role holds, so every role is refused as unauthenticated (401).
    Endpoint("api_external_create", "api", "post", "/api/external/runs/", "login", after="created"),
    Endpoint("api_external_revoke", "api", "post", "/api/external/runs/{pk}/revoke/", "control"),
    Endpoint("api_external_rounds", "api", "post", "/api/external/runs/{pk}/rounds/", "run_token"),
    Endpoint("api_external_finish", "api", "post", "/api/external/runs/{pk}/finish/", "run_token"),
    Endpoint("api_external_fail", "api", "post", "/api/external/runs/{pk}/fail/", "run_token"),
]


def expected(role: str, endpoint: Endpoint) -> str:
    rights = RIGHTS[role]
    if endpoint.needs == "run_token":  # a user's session or API token is no run token
        return "login"
    if endpoint.needs == "any" or endpoint.needs in rights or (endpoint.link and "link" in rights):
        return "ok"
    if role not in SIGNED_IN:
        return "login"
    return "hidden" if "read" not in rights else "forbidden"


@pytest.fixture
def world():
    world = make_world()
    world.other_experiment = make_experiment(world.owner, team=world.team, visibility="public", name="matrix-exp-b")
    world.sweep = Sweep.objects.create(
        owner=world.owner, team=world.team, visibility="team", name=f"{world.experiment.name} sweep",
        base_spec=TINY_SPEC, axes={"seed": [TINY_SPEC["seed"]]},
    )  # fmt: skip
    Experiment.objects.filter(pk=world.experiment.pk).update(sweep=world.sweep)
    return world


def _user(world, role):
    return None if role in ("anonymous", "public") else getattr(world, role)


def _page_url(endpoint: Endpoint, world, role: str) -> str:
    e = world.experiment
    args = {"experiment_shared": [e.share_token], "experiment_compare": []}.get(endpoint.target, [e.pk])
    if endpoint.target in ("experiment_list", "experiment_new", "worker_list", "sweep_list", "sweep_new", "runs_csv"):
        args = []
    if endpoint.target in ("sweep_detail", "sweep_cancel", "sweep_delete"):
        args = [world.sweep.pk]
    url = reverse(endpoint.target, args=args)
    query = {}
    if endpoint.target == "experiment_compare":
        query["ids"] = f"{e.pk},{world.other_experiment.pk}"
    if role == "public":
        query["token"] = e.share_token  # the link visitor carries the token everywhere
    return url + (f"?{urlencode(query)}" if query else "")


def _page_request(endpoint: Endpoint, world, role: str):
    client = Client()
    if user := _user(world, role):
        client.force_login(user)
    data = {
        "experiment_sharing_revoke": {"action": "revoke_link"},
        "experiment_delete": {"confirm": "yes"},
        "experiment_cancel": {"confirm": "yes"},
        "sweep_delete": {"confirm": "yes"},
        "sweep_cancel": {"confirm": "yes"},
        "experiment_priority": {"priority": PRIORITY},
        "experiment_words": {"name": RENAMED},
    }.get(endpoint.id, {})
    return getattr(client, endpoint.method)(_page_url(endpoint, world, role), data)


def _api_request(endpoint: Endpoint, world, role: str):
    client = Client()
    headers = {}
    if user := _user(world, role):
        headers["HTTP_AUTHORIZATION"] = f"Token {Token.objects.get_or_create(user=user)[0].key}"
    url = endpoint.target.format(pk=world.experiment.pk, sweep=world.sweep.pk)
    if role == "public":
        url += f"?token={world.experiment.share_token}"  # a share token is no API credential
    if endpoint.id == "api_create":
        body = {"name": "created", "spec": TINY_SPEC}
        return client.post(url, body, content_type="application/json", **headers)
    if endpoint.id == "api_sweep_create":
        body = {"name": "created", "spec": TINY_SPEC, "axes": {"seed": [0, 1]}}
        return client.post(url, body, content_type="application/json", **headers)
    if endpoint.id == "api_external_create":
        return client.post(url, {"name": "created", "config": {"lr": 0.1}}, content_type="application/json", **headers)
    if endpoint.id == "api_external_rounds":
        body = {"rounds": [{"round": 1, "metrics": {"loss": 0.5}}]}
        return client.post(url, body, content_type="application/json", **headers)
    if endpoint.id == "api_priority":
        return client.post(url, {"priority": PRIORITY}, content_type="application/json", **headers)
    if endpoint.id == "api_words":
        return client.patch(url, {"name": RENAMED}, content_type="application/json", **headers)
    return getattr(client, endpoint.method)(url, **headers)


def _assert_outcome(role: str, response, endpoint: Endpoint, world):
    outcome = expected(role, endpoint)
    e = world.experiment
    body = (b"".join(response.streaming_content) if response.streaming else response.content).decode(errors="replace")
    listed = e.name in body if endpoint.kind == "page" else f'"id":{e.pk},' in body.replace(" ", "")
    if outcome == "ok":
        assert response.status_code in (
            (200, 201, 204) if endpoint.method == "get" or endpoint.kind == "api" else (200, 302)
        )
        assert not response.get("Location", "").startswith("/accounts/login/")
        if endpoint.lists:  # e.g. the list page: everyone signed in gets it; it shows what they may read
            assert listed == ("read" in RIGHTS[role]), "listed exactly for those who may read it"
    elif outcome == "login":
        if endpoint.kind == "api":
            assert response.status_code == 401
        else:
            assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    elif outcome == "hidden":
        if endpoint.lists:
            assert response.status_code == 404 or (response.status_code == 200 and not listed)
        else:
            assert response.status_code == 404
    else:
        assert response.status_code == 403
    _assert_effect(outcome, endpoint, world)


def _assert_effect(outcome: str, endpoint: Endpoint, world):
    e = Experiment.objects.filter(pk=world.experiment.pk).first()
    allowed = outcome == "ok"
    if endpoint.after == "deleted":
        assert (e is None) == allowed
    elif endpoint.after == "created":
        assert Experiment.objects.filter(name__startswith="created").exists() == allowed
    elif endpoint.after == "revoked":
        assert (e.share_token is None) == allowed
    elif endpoint.after == "prioritised":
        assert (e.priority == PRIORITY) == allowed
    elif endpoint.after == "renamed":
        assert (e.name == RENAMED) == allowed and e.edits.exists() == allowed
    elif endpoint.after:
        assert e.status == (endpoint.after if allowed else endpoint.status)
    else:
        assert e is not None and e.status == (endpoint.status or Status.DRAFT)  # reads change nothing


MATRIX = [pytest.param(role, endpoint, id=f"{endpoint.id}-{role}") for endpoint in PAGES + API for role in ROLES]


@pytest.mark.django_db
@pytest.mark.parametrize("role,endpoint", MATRIX)
def test_it_gives_each_role_exactly_its_rights(world, role, endpoint, enqueued):
    if endpoint.status:
        Experiment.objects.filter(pk=world.experiment.pk).update(status=endpoint.status)
    request = _page_request if endpoint.kind == "page" else _api_request
    response = request(endpoint, world, role)
    _assert_outcome(role, response, endpoint, world)


@pytest.mark.django_db
def test_a_run_token_opens_no_other_api_endpoint(world):
    """A leaked run token reads nothing and creates nothing: 401 on every other API endpoint."""
    run = Experiment.objects.create(owner=world.owner, name="ext", kind=Kind.EXTERNAL, spec={}, status="running")
    _, token = ExternalRun.issue(run)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    for endpoint in API:
        if endpoint.needs in ("any", "run_token"):
            continue
        url = endpoint.target.format(pk=world.experiment.pk, sweep=world.sweep.pk)
        response = getattr(client, endpoint.method)(url, {}, content_type="application/json")
        assert response.status_code == 401, (endpoint.id, response.status_code)
    assert Experiment.objects.filter(kind=Kind.EXTERNAL).count() == 1
    answer = client.post(f"/api/external/runs/{run.pk}/rounds/", {"rounds": [{"round": 1, "metrics": {}}]},
                         content_type="application/json")  # fmt: skip
    assert answer.status_code == 201, answer.content


# -- the WebSocket --------------------------------------------------------------------------------


def _connect(experiment, user, query: str = "") -> list:
    """Connect to the experiment socket; return what it sent: messages, or a close code."""

    async def scenario():
        ws = WebsocketCommunicator(ExperimentConsumer.as_asgi(), f"/ws/experiments/{experiment.pk}/{query}")
        ws.scope["user"] = user or AnonymousUser()
        ws.scope["url_route"] = {"kwargs": {"experiment_id": experiment.pk}}
        await ws.connect()
        out = []
        while not out or json.loads(out[-1])["type"] != "status":  # a connect's last message, after the history
            message = await ws.receive_output(timeout=10)
            if message["type"] == "websocket.close":
                return [("closed", message["code"])]
            out.append(message["text"])
        assert await ws.receive_nothing(timeout=0.1)  # and nothing after it
        await ws.disconnect()
        return out

    return async_to_sync(scenario)()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", ROLES)
def test_it_streams_the_experiment_socket_to_exactly_those_who_may_read(world, role):
    query = f"?token={world.experiment.share_token}" if role == "public" else ""
    sent = _connect(world.experiment, _user(world, role), query)
    if expected(role, Endpoint("ws", "ws", "get", "", "read", link=True)) == "ok":
        assert len(sent) == 3 and '"round": 2' in sent[1]  # two rounds of history, then the status
    else:
        assert sent == [("closed", 4403)]


@pytest.mark.django_db(transaction=True)
def test_it_refuses_revoked_and_foreign_tokens_on_the_socket(world):
    token = world.experiment.share_token
    assert _connect(world.other_experiment, None, f"?token={token}") == [("closed", 4403)]  # another experiment's
    world.experiment.revoke_public_link()
    assert _connect(world.experiment, None, f"?token={token}") == [("closed", 4403)]
    assert len(_connect(world.experiment, world.viewer)) == 3  # the team still sees it


# -- rules behind the matrix, on the model and access helpers ---------------------------------------


@pytest.mark.django_db
def test_it_limits_private_experiments_to_their_owner(world):
    from orchestrator.experiments.access import experiments_visible_to

    private = make_experiment(world.owner, team=world.team, visibility="private", name="private")
    assert [u.username for u in (world.owner, world.superuser) if access.can_view(private, u)] == ["olivia", "root"]
    for user in (world.team_owner, world.member, world.viewer, world.other):
        assert not access.can_view(private, user) and not experiments_visible_to(user).filter(pk=private.pk).exists()


@pytest.mark.django_db
def test_it_opens_the_public_link_page_to_the_token_only(world, client):
    from django.http import Http404
    from django.test import RequestFactory

    from orchestrator.experiments.access import get_experiment_for_request, get_experiment_for_token

    token = world.experiment.share_token
    assert get_experiment_for_token(token) == world.experiment
    with pytest.raises(Http404):
        get_experiment_for_token(token, world.other_experiment.pk)  # a token opens its own experiment only
    request = RequestFactory().get("/x", {"token": token})
    request.user = world.other  # signed in, no relation: the link still reads
    assert get_experiment_for_request(request, world.experiment.pk) == world.experiment
    world.experiment.revoke_public_link()
    assert world.experiment.visibility == "team"
    for bad in (token, "", None):
        with pytest.raises(Http404):
            get_experiment_for_token(bad)
    new = world.experiment.enable_public_link()
    assert new != token and get_experiment_for_token(new) == world.experiment


@pytest.mark.django_db
def test_it_never_trusts_a_role_annotated_for_another_user(world):
    from orchestrator.experiments.access import experiments_visible_to

    as_member = experiments_visible_to(world.member).get(pk=world.experiment.pk)
    assert access.can_control(as_member, world.member) and not access.can_control(as_member, world.viewer)
