"""Capacity limits and confined data paths at submission, through the form, the API and the model
(issue 11, items 5 and 6); experiments stored before the limits keep loading."""

import pytest
from rest_framework.test import APIClient

from fedweb_engine.data.paths import OUTSIDE
from fedweb_engine.spec.schema import SpecError
from orchestrator.models import Experiment, Status
from tests.accounts.world import make_user
from tests.conftest import TINY_SPEC
from tests.web.test_forms import post

pytestmark = pytest.mark.django_db

HUGE_MLP = {"model": {"name": "mlp", "hidden": 65536}}
OVER_LIMIT = "model.options.hidden is too large: the model would have 4,347,133,962 parameters (17.4 GB); "


@pytest.fixture
def api():
    client = APIClient()
    client.force_authenticate(make_user("carol"))
    return client


@pytest.fixture
def datasets(settings):
    root = settings.FEDWEB_DATA_DIR / "datasets"
    (root / "femnist").mkdir(parents=True)
    (settings.FEDWEB_DATA_DIR / "private").mkdir()
    (root / "escape").symlink_to(settings.FEDWEB_DATA_DIR / "private")
    return root


def _create(api, spec: dict):
    return api.post("/api/experiments/", {"name": "x", "spec": spec, "start": True}, format="json")


def test_it_refuses_an_over_limit_spec_in_the_api_with_the_estimate_and_the_limit(api, enqueued, settings):
    settings.FEDWEB_MAX_PARAMS = 50_000_000

    response = _create(api, HUGE_MLP)

    assert response.status_code == 400
    assert response.json() == {
        "spec": {"model.options.hidden": [OVER_LIMIT + "this server allows at most 50,000,000 (FEDWEB_MAX_PARAMS)"]}
    }
    assert Experiment.objects.count() == 0 and enqueued == []


def test_it_reads_the_limits_from_settings_at_each_submission(api, settings):
    spec = {**TINY_SPEC, "rounds": 50}
    settings.FEDWEB_MAX_ROUNDS = 10
    refused = _create(api, spec)
    settings.FEDWEB_MAX_ROUNDS = 100
    accepted = _create(api, spec)

    assert refused.json()["spec"]["rounds"] == [
        "rounds is 50; this server allows at most 10 rounds (FEDWEB_MAX_ROUNDS)"
    ]
    assert accepted.status_code == 201 and Experiment.objects.count() == 1


def test_it_refuses_an_over_limit_spec_in_the_form_next_to_the_field(alice_client, enqueued):
    response = post(alice_client, model__name="mlp", model__options__mlp__hidden="65536")

    errors = response.context["form"].errors
    assert response.status_code == 200 and errors["model__options__mlp__hidden"][0].startswith(OVER_LIMIT)
    assert "(FEDWEB_MAX_PARAMS)" in errors["model__options__mlp__hidden"][0]
    assert Experiment.objects.count() == 0 and enqueued == []


def test_it_refuses_over_limit_specs_in_the_model_too(user, settings):
    settings.FEDWEB_MAX_CLIENTS = 10

    with pytest.raises(SpecError) as err:
        Experiment.objects.create(owner=user, name="x", spec=TINY_SPEC)

    assert err.value.field == "data.num_clients" and "(FEDWEB_MAX_CLIENTS)" in str(err.value)
    assert Experiment.objects.count() == 0


@pytest.mark.parametrize("path", ["/etc", "../../..", "../private", "escape", "escape/anything"])
def test_it_refuses_data_paths_outside_the_datasets_folder(api, datasets, path):
    spec = {**TINY_SPEC, "data": {"dataset": "cifar10", "path": path}, "model": {"name": "logistic"}}

    response = _create(api, spec)

    assert response.status_code == 400
    assert response.json() == {"spec": {"data.options.path": [f"data.options.path {OUTSIDE}"]}}
    assert Experiment.objects.count() == 0


def test_it_refuses_a_nul_byte_in_a_path_before_reading_the_spec(api, datasets):
    spec = {**TINY_SPEC, "data": {"dataset": "cifar10", "path": "a\x00b"}, "model": {"name": "logistic"}}

    response = _create(api, spec)  # the API's JSON reader refuses NUL anywhere (fedweb.inputs)

    assert response.status_code == 400 and "NUL" in response.json()["detail"]
    assert Experiment.objects.count() == 0


@pytest.mark.parametrize("path", ["femnist", "femnist/train", "not-there-yet"])
def test_it_accepts_data_paths_inside_the_datasets_folder(api, datasets, path):
    spec = {**TINY_SPEC, "data": {"dataset": "femnist_leaf", "path": path, "num_clients": 20}}

    response = _create(api, spec)

    assert response.status_code == 201 and response.json()["spec"]["data"]["options"]["path"] == path


def test_it_also_accepts_an_absolute_path_inside_the_datasets_folder(alice_client, datasets):
    response = post(
        alice_client, data__name="femnist_leaf", data__options__femnist_leaf__path=str(datasets / "femnist")
    )

    assert response.status_code == 302 and Experiment.objects.get().spec["data"]["options"]["path"] == str(
        datasets / "femnist"
    )


def test_it_refuses_a_path_escape_in_the_form(alice_client, datasets):
    response = post(alice_client, data__name="cifar10", data__options__cifar10__path="/etc")

    assert response.context["form"].errors["data__options__cifar10__path"] == [f"data.options.path {OUTSIDE}"]
    assert Experiment.objects.count() == 0


def test_it_shows_the_estimate_and_the_limits_in_the_side_panel(alice_client):
    from tests.web.test_forms import form_data

    body = alice_client.get("/experiments/new/bandwidth.json", form_data(model__name="cnn")).json()

    resources = alice_client.get("/experiments/new/resources.json", form_data(model__name="cnn")).json()
    assert resources["params"] == body["params"] == 1_199_882 and resources["device_kind"] == "cpu"
    assert 0 < resources["round_bytes"] < resources["limit_round_bytes"]
    assert resources["limit_setting"] == "FEDWEB_MAX_ROUND_MEMORY_CPU"
    refused = alice_client.get(
        "/experiments/new/bandwidth.json", form_data(model__name="mlp", model__options__mlp__hidden="65536")
    )
    assert refused.status_code == 400 and refused.json()["errors"]["model.options.mlp.hidden"][0].startswith(OVER_LIMIT)


def test_it_still_loads_displays_and_saves_an_experiment_stored_before_the_limits(alice_client, user):
    experiment = Experiment.objects.create(owner=user, name="old", spec=TINY_SPEC)
    old = {**TINY_SPEC, "local": {"lr": 1e308}, "model": {"name": "mlp", "hidden": 10**9}, "rounds": 10**6}
    Experiment.objects.filter(pk=experiment.pk).update(spec=old)  # as stored by an older version
    experiment.refresh_from_db()

    assert experiment.parsed_spec().model.options.hidden == 10**9
    experiment.name = "renamed"
    experiment.save()
    assert alice_client.get(f"/experiments/{experiment.pk}/").status_code == 200
    assert alice_client.get(f"/experiments/new/?clone={experiment.pk}").status_code == 200
    assert Experiment.objects.get(pk=experiment.pk).spec["local"]["lr"] == 1e308


def test_it_fails_a_round_whose_stored_path_escapes_on_the_worker_too(user, datasets):
    from workers.rounds import run_inline

    experiment = Experiment.objects.create(owner=user, name="x", spec={**TINY_SPEC, "rounds": 1})
    escaping = {**TINY_SPEC, "data": {"dataset": "cifar10", "path": "../private", "num_clients": 20}}
    Experiment.objects.filter(pk=experiment.pk).update(spec=escaping)  # past the web checks, somehow
    experiment.refresh_from_db()
    experiment.start(enqueue=False)

    experiment = run_inline(experiment)

    assert experiment.status == Status.FAILED
    assert OUTSIDE in experiment.error and "private" not in experiment.error.replace("../private", "")


def test_it_says_in_the_help_when_a_range_depends_on_the_limits_and_other_fields(alice_client, settings):
    import html as entities

    from tests.web.test_forms import form_data

    html = entities.unescape(alice_client.get("/experiments/new/").content.decode())
    refused = alice_client.get(
        "/experiments/new/resources.json", form_data(model__name="mlp", model__options__mlp__hidden="65536")
    )
    assert refused.status_code == 400  # the engine's bound (65,536) is not what this server accepts
    help_text = "Range: >= 1, <= 65,536 where this server's limits allow it (at most"
    assert help_text in html and f"{settings.FEDWEB_MAX_PARAMS:,} parameters" in html
    assert "Range: >= 1, <= 1,000,000, and at most data.num_clients." in html  # clients per round
