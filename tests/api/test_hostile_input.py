"""Hostile bodies and parameters: a clear 400 (or 413 for size), never a 500, nothing stored."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from rest_framework.test import APIClient

from accounts.models import Team
from fedweb.inputs import MAX_JSON_DEPTH, JSONInputError, loads, parse_int
from fedweb_engine.spec.schema import Spec, SpecError
from orchestrator.live.consumers import ExperimentConsumer
from orchestrator.models import Experiment
from tests.accounts.world import make_experiment
from tests.conftest import TINY_SPEC
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(user):
    client = APIClient(raise_request_exception=False)
    client.force_authenticate(user)
    return client


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _post_raw(api, body, content_type="application/json"):
    return api.generic("POST", "/api/experiments/", body, content_type=content_type)


# -- the JSON reader -------------------------------------------------------------------------------


def test_it_reads_json_nested_up_to_the_limit_and_refuses_one_level_more():
    assert loads(_nested(MAX_JSON_DEPTH)) == loads(_nested(MAX_JSON_DEPTH))
    with pytest.raises(JSONInputError, match=f"deeper than {MAX_JSON_DEPTH}"):
        loads(_nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(JSONInputError, match="deeper"):
        loads('{"a":' * 100_000 + "1" + "}" * 100_000)  # far past the interpreter's recursion limit


@pytest.mark.parametrize(
    "text, message",
    [
        ("1e400", "too large"),
        ("-1e400", "too large"),
        ("NaN", "NaN is not"),
        ("[Infinity]", "Infinity is not"),
        ("-Infinity", "-Infinity is not"),
        ("9" * 5000, "outside the integer range"),
        (str(2**63), "outside the integer range"),
        ('"a\\u0000b"', "NUL"),
        ('{"\\ud800": 1}', "surrogates"),
        (b'"\xff\xfe"', "not valid utf-8"),
        ('{"a": 1', "Invalid JSON"),
    ],
)
def test_it_refuses_json_that_would_break_the_code_after_it(text, message):
    with pytest.raises(JSONInputError, match=message):
        loads(text)


def test_it_keeps_ordinary_json_as_json_reads_it():
    text = '{"a": [1, -2.5, 1e300, "é😀", null, true], "b": {"c": 9223372036854775807}}'
    assert loads(text) == {"a": [1, -2.5, 1e300, "é😀", None, True], "b": {"c": 2**63 - 1}}


@pytest.mark.parametrize(
    "raw, expected",
    [("7", 7), (" 12 ", 12), ("-1", -1), ("²", None), ("٣", None), ("1e3", None), ("", None), ("9" * 30, None)],
)
def test_it_parses_integer_parameters_in_ascii_digits_within_64_bits(raw, expected):
    assert parse_int(raw) == expected


# -- the REST API ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        _nested(5000),
        '{"name": "deep", "spec": ' + '{"a": ' * 200 + "1" + "}" * 200 + "}",
        '{"name": "x", "spec": {"local": {"lr": 1e400}}}',
        '{"name": "x", "spec": {"local": {"lr": NaN}}}',
        '{"name": "x", "spec": {"local": {"lr": Infinity}}}',
        '{"name": "x", "spec": {"local": {"lr": ' + "9" * 400 + "}}}",
        '{"name": "x", "spec": {"rounds": ' + "9" * 5000 + "}}",
        '{"name": "x", "team": 99999999999999999999999, "spec": {}}',
        '{"name": "\\ud800", "spec": {}}',
        '{"name": "x", "spec": {"model": {"name": "mlp\\u0000"}}}',
        b'{"name": "\xff\xfe", "spec": {}}',
    ],
)
def test_it_answers_400_to_hostile_json_and_stores_nothing(api, body):
    response = _post_raw(api, body)
    assert response.status_code == 400, response.content
    assert "JSON parse error" in response.json()["detail"]
    assert not Experiment.objects.exists()


def test_it_answers_413_to_an_api_body_over_the_upload_limit(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"name": "big", "description": "' + "x" * 2000 + '", "spec": {}}'
    response = _post_raw(api, body)
    assert response.status_code == 413
    assert "larger than the limit of 1,000 bytes" in response.json()["detail"]
    response = _post_raw(api, "name=big&description=" + "x" * 2000, "application/x-www-form-urlencoded")
    assert response.status_code == 413
    assert not Experiment.objects.exists()


def test_it_answers_413_to_a_page_form_over_the_upload_limit(client, user, settings):
    client.raise_request_exception = False
    client.force_login(user)
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = client.post("/teams/", {"name": "x" * 2000})
    assert response.status_code == 413 and b"larger than the limit of 1,000 bytes" in response.content
    assert not Team.objects.exists()


def test_it_still_creates_from_a_plain_json_body(api):
    response = _post_raw(api, '{"name": "fine", "spec": {"rounds": 3, "local": {"lr": 0.05}}}')
    assert response.status_code == 201, response.content
    assert Experiment.objects.get().spec["local"]["lr"] == 0.05


@pytest.mark.parametrize("after", ["9999999999999999999999", "²", "abc", "1.5"])
def test_it_answers_400_naming_after_for_a_bad_rounds_cursor(api, user, after):
    experiment = make_experiment(user, rounds=3)
    response = api.get(f"/api/experiments/{experiment.pk}/rounds/", {"after": after})
    assert response.status_code == 400 and "after" in response.json()


def test_it_reads_a_negative_rounds_cursor_as_before_the_first_round(api, user):
    experiment = make_experiment(user, rounds=3)
    response = api.get(f"/api/experiments/{experiment.pk}/rounds/", {"after": "-1"})
    assert [r["round"] for r in response.json()] == [1, 2, 3]


# -- pages and the WebSocket -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/compare/?ids=²", "/experiments/statuses.json?ids=99999999999999999999999", "/experiments/new/?clone=²"]
)
def test_it_ignores_ids_that_are_not_64_bit_numbers(client, user, url):
    client.raise_request_exception = False
    client.force_login(user)
    assert client.get(url).status_code == 200


def test_it_refuses_a_deeply_nested_schedule_in_the_form(client, user):
    client.raise_request_exception = False
    client.force_login(user)
    response = client.post("/experiments/new/", form_data(participation__schedule=_nested(10_000)))
    assert response.status_code == 200
    assert response.context["form"].errors["participation__schedule"] == [
        "participation.schedule is not a valid JSON list"
    ]
    assert not Experiment.objects.exists()


def test_it_refuses_a_spec_number_beyond_any_float_by_field():
    with pytest.raises(SpecError) as error:
        Spec.from_dict({**TINY_SPEC, "local": {"lr": 10**400}})
    assert error.value.field == "local.lr"


@pytest.mark.django_db(transaction=True)
def test_it_ignores_a_hostile_websocket_message_and_keeps_the_socket_open(user):
    experiment = Experiment.objects.create(owner=user, name="e", spec=TINY_SPEC)

    async def scenario():
        ws = WebsocketCommunicator(ExperimentConsumer.as_asgi(), f"/ws/experiments/{experiment.pk}/?after=²")
        ws.scope["user"] = user
        ws.scope["url_route"] = {"kwargs": {"experiment_id": experiment.pk}}
        connected, _ = await ws.connect()
        assert connected
        assert (await ws.receive_json_from())["type"] == "status"
        await ws.send_to(text_data=_nested(100_000))
        await ws.send_to(bytes_data=b"\xff\xfe")
        assert await ws.receive_nothing(timeout=0.3)  # neither closed nor crashed
        await ws.disconnect()

    async_to_sync(scenario)()


@pytest.mark.parametrize("path, kind", [("/teams/", "text/html"), ("/api/experiments/", "application/json")])
def test_it_answers_413_when_the_body_turns_out_too_large_without_an_announced_length(rf, path, kind):
    from django.core.exceptions import RequestDataTooBig

    from fedweb.errors import bad_request

    response = bad_request(rf.post(path), RequestDataTooBig("too big"))
    assert response.status_code == 413 and response["Content-Type"].startswith(kind)
    assert b"larger than the limit" in response.content
