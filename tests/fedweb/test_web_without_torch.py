"""The web process never imports torch: the ASGI application, started in a process of its own as
daphne starts it, serves the new-experiment page and its previews, the API (a spec that fits is
created, one too large is refused by field, both measured by the engine's estimates helper) and an
experiment's socket, and torch is still not among its modules."""

from __future__ import annotations

import json
import subprocess
import sys
from urllib.parse import urlencode

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from rest_framework.authtoken.models import Token

from orchestrator.models import Experiment
from tests.conftest import TINY_SPEC
from tests.live import ROOT
from tests.web.test_forms import form_data

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SERVE = r"""
import asyncio, json, sys
from channels.testing import HttpCommunicator, WebsocketCommunicator
from fedweb.asgi import application  # what daphne loads
from fedweb_engine.estimates import helper

token, session, query = sys.argv[1], sys.argv[2], sys.argv[3]
spec, too_big = json.loads(sys.argv[4]), json.loads(sys.argv[5])
user = [(b"host", b"localhost"), (b"cookie", f"sessionid={session}".encode())]
api = [(b"host", b"localhost"), (b"authorization", f"Token {token}".encode()), (b"content-type", b"application/json")]
torch_at_start = "torch" in sys.modules


async def http(method, path, headers, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    headers = headers + [(b"content-length", str(len(data)).encode())]
    answer = await HttpCommunicator(application, method, path, body=data, headers=headers).get_response(timeout=300)
    text = answer["body"].decode()
    return [answer["status"], json.loads(text) if text.startswith(("{", "[")) else len(text)]


async def main():
    out = {"page": await http("GET", "/experiments/new/", user)}
    for box in ("resources", "bandwidth", "partition"):
        out[box] = await http("GET", f"/experiments/new/{box}.json?{query}", user)
    out["list"] = await http("GET", "/api/experiments/", api)
    out["created"] = await http("POST", "/api/experiments/", api, {"name": "fits", "spec": spec})
    out["refused"] = await http("POST", "/api/experiments/", api, {"name": "too big", "spec": too_big})
    if out["created"][0] == 201:
        socket = WebsocketCommunicator(application, f"/ws/experiments/{out['created'][1]['id']}/",
                                       headers=user + [(b"origin", b"http://localhost")])
        out["socket"], _ = await socket.connect(timeout=60)
        await socket.disconnect()
    out["helpers_started"] = helper._helper.started
    out["torch"] = [torch_at_start, "torch" in sys.modules]
    print(json.dumps(out))


asyncio.run(main())
"""


def test_the_web_application_serves_pages_the_api_and_sockets_without_importing_torch(live_env):
    user = get_user_model().objects.create_user("webonly", password="pw")
    token = Token.objects.create(user=user).key
    browser = Client()
    browser.force_login(user)
    session = browser.cookies["sessionid"].value
    too_big = {**TINY_SPEC, "model": {"name": "mlp", "options": {"hidden": 60_000}}}
    env = {**live_env, "FEDWEB_MAX_PARAMS": "2000000"}
    done = subprocess.run(
        [sys.executable, "-c", SERVE, token, session, urlencode(form_data()), json.dumps(TINY_SPEC), json.dumps(too_big)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])

    assert out["page"][0] == 200
    assert out["resources"][0] == 200 and out["resources"][1]["params"] > 0
    assert out["bandwidth"][0] == 200 and out["bandwidth"][1]["down_per_client"] > 0
    assert out["partition"][0] == 200 and out["partition"][1]["previewed"] is True
    assert out["list"][0] == 200
    assert out["created"][0] == 201, out["created"]
    assert Experiment.objects.get(pk=out["created"][1]["id"]).name == "fits"
    status, errors = out["refused"]
    assert status == 400 and "model.options.hidden" in json.dumps(errors) and "FEDWEB_MAX_PARAMS" in json.dumps(errors)
    assert not Experiment.objects.filter(name="too big").exists()
    assert out["socket"] is True
    assert out["helpers_started"] == 1  # every estimate above came from one helper process
    assert out["torch"] == [False, False]
