"""Property: no hostile API or form input gets a 5xx, and a refused one stores nothing.

Hypothesis generates the inputs (derandomized: the same ones on every run, so CI is deterministic):
random JSON trees, specs built from the engine's real field names with wrong or extreme values,
raw bodies with odd content types and invalid UTF-8, odd ids and parameters, and random values for
every page form. Each example runs in a savepoint that is rolled back, so examples don't interact.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import contextmanager
from urllib.parse import quote, urlencode

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token

from accounts.models import Invitation, Membership, Team
from fedweb_engine.components import registry
from fedweb_engine.spec import legacy as spec_legacy
from fedweb_engine.spec.schema import COMPONENT_PATHS, SECTIONS, spec_fields
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import LogEntry, RoundMetric
from tests.accounts.world import make_world
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db

# Deterministic and bounded: each test states its number of examples (they add up to 500+).
HOSTILE = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
SPEC_FIELDS = sorted(spec_fields())
FORM_FIELDS = [name.replace(".", "__") for name in SPEC_FIELDS]

# -- strategies ------------------------------------------------------------------------------------

EXTREME_NUMBERS = [
    0, -1, 1, 10**9, 10**18, 2**63 - 1, 2**63, -(2**63), 10**30, -(10**30), 10**400, 1e308, -1e308, 5e-324, 0.5, -0.0,
]  # fmt: skip
# Written as JSON text, since json.dumps can't make most of them.
BAD_JSON_TOKENS = [
    "NaN", "Infinity", "-Infinity", "1e400", "-1e400", "9" * 25, "-" + "9" * 25, "9" * 5000, '"\\ud800"',
    '"a\\u0000b"', "[" * 100 + "]" * 100, '{"a":' * 80 + "1" + "}" * 80, "[" * 3000 + "]" * 3000, "1.5e-400",
]  # fmt: skip
BAD_TEXT = [
    "NaN", "inf", "-inf", "1e400", "9" * 30, "9" * 5000, "-0", "0x10", "1_000", " 5 ", "²", "٣", "[[[[", "null",
    "[" * 2000 + "]" * 2000, "[1e400]", "[" + "9" * 5000 + "]", "true", "\x00", "a\x00b", "'; DROP TABLE x; --",
    "<script>alert(1)</script>", "../../../etc/passwd", "😀" * 50, "x" * 5000,
]  # fmt: skip
CONTENT_TYPES = [
    "application/json", "application/json; charset=utf-16", "application/json; charset=bz2_codec",
    "application/json; charset=nope", "application/json; charset=latin-1", "text/plain", "application/xml", "",
    "application/x-www-form-urlencoded", "application/x-www-form-urlencoded; charset=bz2_codec",
    "multipart/form-data", "multipart/form-data; boundary=", "multipart/form-data; boundary=xyz", "*/*",
]  # fmt: skip

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # form data must be encodable
odd_text = st.one_of(text, st.sampled_from(BAD_TEXT), st.integers().map(str), st.floats().map(repr))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1),
    st.sampled_from(EXTREME_NUMBERS),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),  # surrogates included: json.dumps escapes them
    st.text(min_size=300, max_size=1000),
)
trees = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
)


@st.composite
def specs(draw) -> dict:
    """A spec with a few real fields set to wrong or extreme values, and perhaps an unknown key."""
    spec: dict = {}
    for dotted in draw(st.lists(st.sampled_from(SPEC_FIELDS), min_size=1, max_size=4)):
        section, _, name = dotted.partition(".")
        value = draw(st.one_of(scalars, trees))
        if name:
            spec.setdefault(section, {})
            if isinstance(spec[section], dict):
                spec[section][name] = value
        else:
            spec[section] = value
    if draw(st.booleans()):
        spec[draw(st.text(max_size=10))] = draw(scalars)
    return spec


@st.composite
def unknown_key_specs(draw) -> tuple[dict, str, list[str]]:
    """A spec whose component section (or its options) carries a key the chosen component lacks:
    (spec, the dotted key, the component's real option names)."""
    path = draw(st.sampled_from(["model", "data", "algorithm"]))
    kind = COMPONENT_PATHS[path]
    component = registry.get(kind, draw(st.sampled_from(registry.names(kind))))
    own = [f.name for f in dataclasses.fields(component.options)]
    old = [k for k, new in spec_legacy.OLD_OPTION_KEYS[path].items() if new not in own]
    section_fields = {f.name for f in dataclasses.fields(SECTIONS[path])}
    key = draw(
        st.one_of(st.sampled_from(old or ["zzz"]), st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12))
    )
    assume(key not in own and key not in section_fields and key not in spec_legacy.OLD_OPTION_KEYS[path] or key in old)
    # Values the body parser takes (it refuses NUL characters and integers beyond 64 bits first).
    value = draw(
        st.one_of(
            st.none(), st.booleans(), st.sampled_from([0, -1, 3, 1e308, -1e308, 0.5]), st.text("ab./", max_size=12)
        )
    )
    assume(key not in old or not spec_legacy._is_old_default(path, key, value))
    where = draw(st.sampled_from(["section", "options"])) if key not in old else "section"
    section = {"name": component.name}
    if where == "options":
        section["options"] = {key: value}
        return {path: section}, f"{path}.options.{key}", own
    section[key] = value
    return {path: section}, f"{path}.{key}", own


@st.composite
def create_bodies(draw) -> dict:
    body = {"name": draw(st.one_of(st.text(max_size=250), scalars)), "spec": draw(st.one_of(specs(), trees))}
    for key, values in [
        ("team", st.one_of(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1), st.text(max_size=5), trees)),
        ("visibility", st.one_of(st.sampled_from(["private", "team", "public"]), scalars)),
        ("tags", st.one_of(st.lists(st.text(max_size=60), max_size=4), trees)),
        ("start", scalars),
        ("description", scalars),
        (draw(st.text(max_size=10)), trees),
    ]:
        if draw(st.booleans()):
            body[key] = draw(values)
    return body


@st.composite
def raw_json(draw) -> str:
    """A plausible create body with one bad JSON token spliced into a spec field."""
    dotted = draw(st.sampled_from(SPEC_FIELDS))
    section, _, name = dotted.partition(".")
    token = draw(st.sampled_from(BAD_JSON_TOKENS))
    spec = f'{{"{section}": {{"{name}": {token}}}}}' if name else f'{{"{section}": {token}}}'
    return f'{{"name": "n", "spec": {spec}}}'


ODD_PARAMS = ["0", "00", "-1", "+1", "²", "٣", "1e3", "1.5", "", "abc", "9" * 22, "9" * 5000, "1,,2", "\x00", "%00"]
ids = st.one_of(st.integers(min_value=0, max_value=10**25).map(str), st.sampled_from(ODD_PARAMS))
params = st.one_of(st.sampled_from(ODD_PARAMS), odd_text)

# -- the invariant ---------------------------------------------------------------------------------


def _stored() -> tuple:
    """Everything a request could add or change, as plain values."""
    User = get_user_model()
    tables = [
        User.objects.values("username", "password", "is_active"),
        Team.objects.values(),
        Membership.objects.values(),
        Invitation.objects.values(),
        Experiment.objects.values(),
        RoundMetric.objects.values("experiment_id", "round"),
        LogEntry.objects.values("experiment_id", "message"),
        Token.objects.values("key", "user_id"),
    ]
    return tuple(json.dumps(list(t.order_by("pk")), sort_keys=True, default=str) for t in tables)


@contextmanager
def _rolled_back():
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


def _send(client, method: str, path: str, *, refused=None, **kwargs):
    """Make the request; assert no 5xx, and nothing stored when the answer is a refusal."""
    before = _stored()
    with _rolled_back():
        response = client.generic(method, path, **kwargs)
        assert response.status_code < 500, (method, path, response.status_code, response.content[:300])
        if (refused or _is_refusal)(response):
            assert _stored() == before, (method, path, response.status_code)
    return response


def _is_refusal(response) -> bool:
    return response.status_code >= 400


def _form_refusal(response) -> bool:  # an invalid page form is shown again (200) or answered 400
    return response.status_code != 302


def _form(data: dict) -> dict:
    return {"data": urlencode(data), "content_type": "application/x-www-form-urlencoded"}


@pytest.fixture
def world():
    return make_world()


def _run(examples: int, strategy, body) -> None:
    seen: list[int] = []

    @settings(HOSTILE, max_examples=examples)
    @given(strategy)
    def run(value):
        seen.append(1)
        body(value)

    run()
    assert len(seen) >= examples


# -- the API ---------------------------------------------------------------------------------------


def test_it_never_fails_on_random_create_bodies(client, world):
    client.force_login(world.owner)
    _run(150, create_bodies(), lambda body: _send(client, "POST", "/api/experiments/", **_json(body)))


def test_it_refuses_keys_the_chosen_component_lacks_naming_its_options(client, world):
    client.force_login(world.owner)

    def check(case):
        spec, field, own = case
        response = _send(client, "POST", "/api/experiments/", **_json({"name": "n", "spec": spec}))
        assert response.status_code == 400, (spec, response.content[:300])
        message = response.json()["spec"][field][0]
        assert all(name in message for name in own) if own else "none" in message, (spec, message)

    _run(40, unknown_key_specs(), check)


def test_it_never_fails_on_bad_json_tokens_in_a_spec(client, world):
    def check(body):
        response = _send(client, "POST", "/api/experiments/", data=body, content_type="application/json")
        assert response.status_code == 400

    client.force_login(world.owner)
    _run(60, raw_json(), check)


def test_it_never_fails_on_raw_bodies_with_odd_content_types(client, world):
    client.force_login(world.owner)
    sharing = f"/experiments/{world.experiment.pk}/sharing/"
    paths = ["/api/experiments/", "/api/token/", "/experiments/new/", "/teams/", sharing]
    bodies = st.one_of(
        st.binary(max_size=300), st.sampled_from([b"\xff\xfe\xfa", b'{"name": "\xc3\x28"}', b"--xyz\r\n"])
    )
    strategy = st.tuples(st.sampled_from(paths), st.sampled_from(CONTENT_TYPES), bodies)
    refusal = {"/api/experiments/": _is_refusal, "/api/token/": _is_refusal}

    def check(case):
        path, content_type, body = case
        _send(client, "POST", path, data=body, content_type=content_type, refused=refusal.get(path, _form_refusal))

    _run(80, strategy, check)


def test_it_never_fails_on_odd_ids_and_parameters(client, world):
    client.force_login(world.viewer)  # may read the experiment, change nothing: every answer stores nothing
    paths = [
        "/api/experiments/{id}/", "/api/experiments/{id}/start/", "/api/experiments/{id}/cancel/",
        "/api/experiments/{id}/rounds/?after={p}", "/api/experiments/{id}/rounds.csv",
        "/api/experiments/?status={p}&scope={p}&q={p}", "/api/experiments/?q={p}&columns={p}&sort={p}&target={p}",
        "/api/experiments/?group={p}&page={p}&page_size={p}", "/?q={p}", "/?columns={p}&group={p}&sort={p}&target={p}",
        "/runs.csv?q={p}&group={p}", "/compare/?q={p}&group={p}", "/views/{id}/",
        "/experiments/{id}/", "/experiments/{id}/rounds.json", "/experiments/statuses.json?ids={id},{p}",
        "/compare/?ids={id},{p}", "/experiments/new/?clone={p}", "/share/{p}/", "/experiments/{id}/pause/",
    ]  # fmt: skip
    real = str(world.experiment.pk)
    strategy = st.tuples(
        st.sampled_from(["GET", "POST", "DELETE"]), st.sampled_from(paths), st.one_of(ids, st.just(real)), params
    )

    def check(case):
        method, path, pk, param = case
        _send(client, method, path.format(id=pk, p=quote(param, safe="")), refused=lambda r: True)

    _run(150, strategy, check)


def test_it_never_fails_on_the_token_endpoints(client, world):
    latin1 = st.text(st.characters(max_codepoint=255), max_size=60)
    strategy = st.tuples(
        st.sampled_from(["obtain", "obtain-json", "rotate", "revoke", "page"]), odd_text, odd_text, latin1
    )

    def check(case):
        kind, username, password, header = case
        auth = {"HTTP_AUTHORIZATION": header}
        if kind == "obtain":
            _send(client, "POST", "/api/token/", **_form({"username": username, "password": password}))
        elif kind == "obtain-json":
            _send(client, "POST", "/api/token/", **_json({"username": username, "password": [password]}))
        elif kind == "rotate":
            _send(client, "POST", "/api/token/rotate/", **auth)
        elif kind == "revoke":
            _send(client, "DELETE", "/api/token/", **auth)
        else:
            client.force_login(world.member)
            _send(client, "POST", "/accounts/token/", **_form({"action": username}), refused=_page_refusal(username))
            client.logout()

    _run(60, strategy, check)


def _page_refusal(action: str):
    return (lambda r: True) if action not in ("rotate", "revoke") else _is_refusal


def _json(body) -> dict:
    return {"data": json.dumps(body), "content_type": "application/json"}


# -- the page forms --------------------------------------------------------------------------------


def test_it_never_fails_on_random_new_experiment_forms(client, world):
    client.force_login(world.owner)
    names = st.sampled_from(["name", "tags", "team", "visibility", *FORM_FIELDS])
    changes = st.dictionaries(names, odd_text, min_size=1, max_size=5)
    _run(
        80,
        changes,
        lambda c: _send(client, "POST", "/experiments/new/", **_form(form_data(**c)), refused=_form_refusal),
    )


def test_it_never_fails_on_the_sharing_form(client, world):
    client.force_login(world.owner)
    keys = st.sampled_from(["action", "team", "visibility", "extra"])
    path = f"/experiments/{world.experiment.pk}/sharing/"
    _run(
        30,
        st.dictionaries(keys, odd_text),
        lambda data: _send(client, "POST", path, **_form(data), refused=_form_refusal),
    )


def test_it_never_fails_on_the_team_and_invitation_forms(client, world):
    client.force_login(world.team_owner)
    member = Membership.objects.get(team=world.team, user=world.member)
    paths = [
        "/teams/", f"/teams/{world.team.pk}/invite/", f"/teams/{world.team.pk}/members/{member.pk}/role/",
        f"/teams/{world.team.pk}/invitations/{{p}}/revoke/", "/teams/{p}/invite/",
    ]  # fmt: skip
    data = st.dictionaries(st.sampled_from(["name", "email", "role", "x"]), odd_text)
    strategy = st.tuples(st.sampled_from(paths), st.one_of(ids, odd_text), data)

    def check(case):
        path, p, body = case
        _send(client, "POST", path.replace("{p}", quote(p, safe="")), **_form(body), refused=_form_refusal)

    _run(40, strategy, check)


def test_it_never_fails_on_the_new_experiment_previews(client, world):
    client.force_login(world.owner)
    paths = st.sampled_from(["/experiments/new/bandwidth.json", "/experiments/new/partition.json"])
    changes = st.dictionaries(st.sampled_from(FORM_FIELDS), odd_text, min_size=1, max_size=4)
    strategy = st.tuples(paths, changes)
    statuses: list[int] = []

    def check(case):
        path, change = case
        statuses.append(
            _send(client, "GET", f"{path}?{urlencode(form_data(**change))}", refused=lambda r: True).status_code
        )

    _run(30, strategy, check)
    assert {200, 400} <= set(statuses)  # both answers were reached: the inputs got to the estimates
