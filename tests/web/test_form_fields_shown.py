"""The new-experiment form shows what matters: the server-rendered page (no JavaScript) shows every
field, carries each field's "applies when" rule, folds the advanced fields, and a spec whose hidden
fields are set is judged exactly as the API judges it."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest
from rest_framework.test import APIClient

from fedweb_engine.spec.schema import spec_fields
from orchestrator.experiments.models import Experiment
from orchestrator.web.forms.experiment_forms import HIDDEN_SPEC_FIELDS, form_name
from tests.web.test_forms import form_data

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
    assert not folded & {"data.name", "model.name", "algorithm.name", "communication.uplink.name"}


def test_it_carries_each_fields_rule_in_the_pages_terms(alice_client):
    page = page_fields(alice_client)
    alpha = json.loads(page.wrappers["data__alpha"]["data-applies-when"])
    assert alpha == [{"data__partition": ["dirichlet"]}]
    topk = json.loads(page.wrappers["communication__uplink__options__topk__ratio"]["data-applies-when"])
    assert topk == [{"communication__uplink__name": ["topk"]}]
    image_size = page.wrappers["data__options__digits__image_size"]["data-applies-when"]
    assert json.loads(image_size) == [{"data__name": ["digits"]}]
    for dotted, meta in SHOWN_FIELDS.items():
        assert ("data-applies-when" in page.wrappers[form_name(dotted)]) == (meta["applies_when"] is not None), dotted


# Fields that do not apply to the default choices (dirichlet, cnn, fedavg, fp32 codecs, digits), set anyway.
INAPPLICABLE_SET = {
    "data": {"partition": "iid", "alpha": 0.3, "shards_per_client": 7},
    "model": {"name": "cnn"},
    "algorithm": {"name": "fedavg"},
    "communication": {"error_feedback": False},
    "compute": {"device": "cpu"},
}
# Options of components that are not selected: the form's hidden inputs and a flat spec's old keys.
OTHER_COMPONENTS_FORM = {"model__options__mlp__hidden": "17", "algorithm__options__fedadam__tau": "0.25"}
OTHER_COMPONENTS_FLAT = {"model": {"hidden": 17}, "algorithm": {"tau": 0.25}}


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
    post = {**as_post(INAPPLICABLE_SET), **OTHER_COMPONENTS_FORM}
    assert alice_client.post("/experiments/new/", post).status_code == 302
    response = api_client(user).post("/api/experiments/", {"name": "run", "spec": INAPPLICABLE_SET}, format="json")
    assert response.status_code == 201, response.json()
    from_form, from_api = Experiment.objects.order_by("pk")
    assert from_form.spec == from_api.spec
    assert from_form.spec["data"]["alpha"] == 0.3 and from_form.spec["communication"]["error_feedback"] is False
    assert from_form.spec["model"]["options"] == {} and from_form.spec["algorithm"]["options"] == {}


def test_the_api_refuses_old_keys_of_components_not_selected_naming_the_real_options(user, enqueued):
    # The form's hidden inputs of other components are its own widgets; a spec that writes an old
    # key the chosen component lacks asked for something the run would not do (issue 21).
    flat = {k: {**v, **OTHER_COMPONENTS_FLAT.get(k, {})} for k, v in INAPPLICABLE_SET.items()}
    response = api_client(user).post("/api/experiments/", {"name": "run", "spec": flat}, format="json")
    assert response.status_code == 400
    assert response.json()["spec"] == {
        "model.hidden": ["model.hidden is not an option of model 'cnn': its options are none (in model.options)"]
    }
    assert not Experiment.objects.exists()


@pytest.mark.parametrize(
    "spec, field",
    [
        ({"data": {"partition": "iid", "alpha": 0}}, "data.alpha"),
        ({"data": {"partition": "iid", "shards_per_client": 0}}, "data.shards_per_client"),
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


@pytest.mark.parametrize(
    "spec, form_field",
    [
        ({"model": {"name": "vgg", "options": {"width": 0}}}, "model__options__vgg__width"),
        ({"algorithm": {"name": "fedadam", "options": {"tau": 0}}}, "algorithm__options__fedadam__tau"),
        (
            {"communication": {"uplink": {"name": "topk", "options": {"ratio": 0}}}},
            "communication__uplink__options__topk__ratio",
        ),
    ],
)
def test_it_puts_a_component_option_error_on_the_selected_components_input_as_the_api_names_it(
    alice_client, user, enqueued, spec, form_field
):
    section, values = next(iter(spec.items()))
    link = values.get("uplink", values)
    prefix = "communication__uplink" if "uplink" in values else section
    (value,) = link["options"].values()
    post = {f"{prefix}__name": link["name"], form_field: str(value)}
    response = alice_client.post("/experiments/new/", form_data(**post))
    api = api_client(user).post("/api/experiments/", {"name": "bad", "spec": spec}, format="json")
    assert response.status_code == 200 and api.status_code == 400
    (dotted,) = api.json()["spec"]
    assert list(response.context["form"].errors[form_field]) == api.json()["spec"][dotted]
    assert not Experiment.objects.exists()
