"""A plugin's component in the web: the form shows its options for it alone, the API judges them."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from rest_framework.test import APIClient

from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from orchestrator.models import Experiment
from tests.web.test_form_fields_shown import page_fields

pytestmark = pytest.mark.django_db


@dataclass(frozen=True)
class HalveOptions:
    factor: float = option(0.5, "Share of the update kept.", min=0, min_open=True, max=1)


@pytest.fixture
def halve_strategy():
    from fedweb_engine.strategies import FedAvg

    @registry.strategy("halve_test", HalveOptions)
    def halve(*, num_params, device, lr, options):
        return FedAvg(num_params=num_params, device=device, lr=lr * options.factor)

    yield "halve_test"
    registry.unregister("strategy", "halve_test")


def test_the_form_offers_a_plugin_strategy_with_its_options_shown_only_for_it(alice_client, halve_strategy):
    page = page_fields(alice_client)
    rule = json.loads(page.wrappers["algorithm__options__halve_test__factor"]["data-applies-when"])
    assert rule == [{"algorithm__name": ["halve_test"]}]
    assert 'value="halve_test"' in alice_client.get("/experiments/new/").content.decode()


def test_the_api_refuses_bad_plugin_options_by_their_dotted_name_and_stores_nothing(user, halve_strategy, enqueued):
    client = APIClient()
    client.force_authenticate(user)
    spec = {"algorithm": {"name": "halve_test", "options": {"factor": 2}}, "compute": {"device": "cpu"}}

    response = client.post("/api/experiments/", {"name": "bad", "spec": spec}, format="json")

    assert response.status_code == 400
    assert response.json() == {"spec": {"algorithm.options.factor": ["algorithm.options.factor must be <= 1"]}}
    assert not Experiment.objects.exists()
    spec["algorithm"]["options"]["factor"] = 0.25
    created = client.post("/api/experiments/", {"name": "ok", "spec": spec}, format="json")
    assert created.status_code == 201 and created.json()["spec"]["algorithm"]["options"] == {"factor": 0.25}
