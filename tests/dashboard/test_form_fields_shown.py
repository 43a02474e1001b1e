"""The new-experiment form shows what matters: the server-rendered page (no JavaScript) shows every
field, carries each field's "applies when" rule, folds the advanced fields, and a spec whose hidden
fields are set is judged exactly as the API judges it."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from rest_framework.test import APIClient

from orchestrator.forms import HIDDEN_SPEC_FIELDS, form_name
from orchestrator.models import Experiment
from tests.dashboard.test_forms import form_data
from workers.engine.spec import spec_fields

pytestmark = pytest.mark.django_db


class Fields(HTMLParser):
    """Every field wrapper of the page (its attributes, whether it sits in the advanced fold) and
    every label's ``for``."""

    def __init__(self):
        super().__init__()
        self.wrappers: dict[str, dict] = {}
        self.labels: set[str] = set()
        self.fold: dict | None = None
        self.in_fold = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "details" and attrs.get("id") == "advanced":
            self.fold, self.in_fold = attrs, True
        elif tag == "div" and attrs.get("id", "").startswith("field-"):
            self.wrappers[attrs["id"][len("field-") :]] = {**attrs, "folded": self.in_fold}
        elif tag == "label" and attrs.get("for"):
            self.labels.add(attrs["for"])

    def handle_endtag(self, tag):
        if tag == "details":
            self.in_fold = False


def page_fields(client, url: str = "/experiments/new/") -> Fields:
    parser = Fields()
    parser.feed(client.get(url).content.decode())
    return parser


SHOWN_FIELDS = {dotted: meta for dotted, meta in spec_fields().items() if dotted not in HIDDEN_SPEC_FIELDS}


def test_it_shows_every_field_with_its_label_when_served_without_javascript(alice_client):
    page = page_fields(alice_client)
    assert set(SHOWN_FIELDS) <= {name.replace("__", ".") for name in page.wrappers}
    assert [name for name, attrs in page.wrappers.items() if "hidden" in attrs] == []
    assert {f"id_{form_name(d)}" for d in SHOWN_FIELDS} <= page.labels
    assert page.fold is not None and "open" in page.fold  # folded by the page script, not the server


def test_it_folds_exactly_the_fields_the_engine_marks_advanced(alice_client):
    page = page_fields(alice_client)
    folded = {d for d in SHOWN_FIELDS if page.wrappers[form_name(d)]["folded"]}
    assert folded == {d for d, meta in SHOWN_FIELDS.items() if meta["advanced"]}
    assert {"compute.precision", "local.weight_decay", "participation.schedule"} <= folded
    assert not folded & {"data.dataset", "model.name", "algorithm.name", "communication.uplink"}


def test_it_carries_each_fields_rule_in_the_pages_terms(alice_client):
    page = page_fields(alice_client)
    alpha = json.loads(page.wrappers["data__alpha"]["data-applies-when"])
    assert alpha == [{"data__partition": ["dirichlet"]}]
    topk = json.loads(page.wrappers["communication__topk_ratio"]["data-applies-when"])
    assert topk == [{"communication__uplink": ["topk"]}, {"communication__downlink": ["topk"]}]
    assert json.loads(page.wrappers["data__image_size"]["data-applies-when"]) == [{"data__dataset": ["digits"]}]
    for dotted, meta in SHOWN_FIELDS.items():
        assert ("data-applies-when" in page.wrappers[form_name(dotted)]) == (meta["applies_when"] is not None), dotted


# Fields that do not apply to the default choices (dirichlet, cnn, fedavg, fp32 codecs, digits), set anyway.
INAPPLICABLE_SET = {
    "data": {"partition": "iid", "alpha": 0.3, "shards_per_client": 7, "seq_len": 9, "synthetic_alpha": 2.0},
    "model": {"name": "cnn", "hidden": 17, "blocks": 3},
    "algorithm": {"name": "fedavg", "server_momentum": 0.1, "beta1": 0.5, "beta2": 0.5, "tau": 0.25},
    "communication": {"uplink": "fp32", "topk_ratio": 0.5, "error_feedback": False},
    "compute": {"device": "cpu"},
}


def api_client(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def as_post(spec: dict) -> dict:
    changes = {}
    for section, values in spec.items():
        for name, value in values.items():
            if value is False:
                continue  # an unticked checkbox sends nothing
            changes[form_name(f"{section}.{name}")] = "on" if value is True else str(value)
    data = form_data(**changes)
    if spec.get("communication", {}).get("error_feedback") is False:
        data.pop("communication__error_feedback", None)
    return data


def test_it_keeps_the_values_of_fields_that_do_not_apply_as_the_api_does(alice_client, user, enqueued):
    assert alice_client.post("/experiments/new/", as_post(INAPPLICABLE_SET)).status_code == 302
    response = api_client(user).post("/api/experiments/", {"name": "run", "spec": INAPPLICABLE_SET}, format="json")
    assert response.status_code == 201, response.json()
    from_form, from_api = Experiment.objects.order_by("pk")
    assert from_form.spec == from_api.spec
    assert from_form.spec["data"]["alpha"] == 0.3 and from_form.spec["model"]["hidden"] == 17
    assert from_form.spec["algorithm"]["tau"] == 0.25 and from_form.spec["communication"]["error_feedback"] is False


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"data": {"partition": "iid", "alpha": 0}}, "data.alpha"),
        ({"data": {"partition": "iid", "shards_per_client": 0}}, "data.shards_per_client"),
        ({"model": {"name": "logistic", "hidden": 0}}, "model.hidden"),
        ({"algorithm": {"name": "fedavg", "tau": 0}}, "algorithm.tau"),
        ({"algorithm": {"name": "fedprox", "server_momentum": 1.5}}, "algorithm.server_momentum"),
        ({"communication": {"uplink": "int8", "topk_ratio": 0}}, "communication.topk_ratio"),
        ({"data": {"dataset": "digits", "seq_len": 1}}, "data.seq_len"),
    ],
)
def test_it_refuses_a_bad_value_in_a_field_that_does_not_apply_as_the_api_does(
    alice_client, user, enqueued, spec, field
):
    response = alice_client.post("/experiments/new/", as_post(spec))
    api = api_client(user).post("/api/experiments/", {"name": "bad", "spec": spec}, format="json")
    assert response.status_code == 200 and api.status_code == 400
    form_errors = response.context["form"].errors[form_name(field)]
    assert list(form_errors) == api.json()["spec"][field]
    assert 'class="field invalid" id="field-' + form_name(field) in response.content.decode()
    assert Experiment.objects.count() == 0 and enqueued == []
