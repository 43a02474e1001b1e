import pytest

from fedweb_engine.spec.presets import PRESETS, VARYING_SCHEDULE
from fedweb_engine.spec.schema import Spec
from orchestrator.experiments.models import Experiment
from orchestrator.web.forms.experiment_forms import ExperimentForm, spec_initial

pytestmark = pytest.mark.django_db


def form_data(**changes) -> dict:
    """POST data of the form filled with the engine defaults (as a browser would send it)."""
    data = {"name": "run", "description": "", "tags": "a, b"}
    for key, value in spec_initial({"compute": {"device": "cpu"}}).items():
        if value is True:
            data[key] = "on"
        elif value is not False and value is not None:
            data[key] = str(value)
    data.update(changes)
    return data


def post(client, **changes):
    return client.post("/experiments/new/", form_data(**changes))


def test_it_creates_and_starts_an_experiment(alice_client, user, enqueued):
    response = post(alice_client, rounds="7", data__alpha="0.3")
    experiment = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/experiments/{experiment.pk}/"
    assert experiment.owner == user and experiment.status == "queued" and experiment.tags == ["a", "b"]
    assert experiment.spec["rounds"] == 7 and experiment.spec["data"]["alpha"] == 0.3
    assert len(enqueued) == 1


@pytest.mark.parametrize(
    "changes, field, message",
    [
        ({"rounds": "-3"}, "rounds", "rounds must be >= 1"),
        ({"data__alpha": "0"}, "data__alpha", "data.alpha must be > 0"),
        ({"data__alpha": "-1.5"}, "data__alpha", "data.alpha must be > 0"),
        ({"model__name": "resnet"}, "model__name", "model.name must be one of"),
        (
            {"rounds": "5", "participation__schedule": "3, 4, 5"},
            "participation__schedule",
            "has 3 entries but rounds is 5",
        ),
        ({"rounds": "ten"}, "rounds", "rounds must be a whole number"),
        ({"local__lr": "fast"}, "local__lr", "local.lr must be a number"),
        ({"participation__schedule": "3, x"}, "participation__schedule", "participation.schedule must be a list"),
        (
            {"participation__clients_per_round": "500"},
            "participation__clients_per_round",
            "must be <= data.num_clients",
        ),
    ],
)
def test_it_puts_errors_next_to_the_field_and_stores_nothing(alice_client, enqueued, changes, field, message):
    response = post(alice_client, **changes)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and message in " ".join(errors[field]), errors
    assert f'id="field-{field}"' in response.content.decode()
    assert Experiment.objects.count() == 0 and enqueued == []


def test_it_accepts_a_schedule_as_a_list_or_json(user):
    pasted = ", ".join(str(n) for n in VARYING_SCHEDULE)
    form = ExperimentForm(form_data(rounds="45", data__num_clients="500", participation__schedule=pasted))
    assert form.is_valid(), form.errors
    assert Spec.from_dict(form.spec_dict()).participation.schedule == VARYING_SCHEDULE
    form = ExperimentForm(form_data(rounds="3", participation__schedule="[7, 8, 9]"))
    assert form.is_valid(), form.errors
    assert Spec.from_dict(form.spec_dict()).participation.schedule == [7, 8, 9]


def test_it_round_trips_every_preset_through_the_form(user):
    for name, preset in PRESETS.items():
        data = {k: ("on" if v is True else str(v) if not isinstance(v, list) else ", ".join(map(str, v)))
                for k, v in spec_initial(preset["spec"]).items() if v is not False and v is not None}  # fmt: skip
        form = ExperimentForm({**data, "name": name})
        assert form.is_valid(), (name, form.errors)
        assert Spec.from_dict(form.spec_dict()) == Spec.from_dict(preset["spec"]), name


def test_it_prefills_the_form_from_a_preset(alice_client):
    response = alice_client.get("/experiments/new/?preset=fedprox-stragglers")
    form = response.context["form"]
    assert (
        form.initial["algorithm__client__name"] == "fedprox"
        and form.initial["algorithm__client__options__fedprox__mu"] == 1.0
    )
    assert form.initial["heterogeneity__straggler_fraction"] == 0.9 and form.initial["name"] == "fedprox-stragglers"
    html = response.content.decode()
    assert 'value="fedprox" selected' in html
    for section in ("data", "model", "algorithm", "participation", "local", "heterogeneity", "communication",
                    "compute", "evaluation"):  # fmt: skip
        assert f'id="section-{section}"' in html
    assert "Default: 0.5." in html  # data.alpha's help shows the spec default


def test_it_prefills_the_schedule_of_the_varying_preset(alice_client):
    response = alice_client.get("/experiments/new/?preset=varying-participants")
    assert "108, 113, 93, 92" in response.content.decode()


def test_it_clones_an_experiment_the_user_can_view(alice_client, user, other_user):
    from tests.web.conftest import make_experiment

    mine = make_experiment(user, name="base", tags=["x"], spec={"rounds": 9, "data": {"alpha": 0.2}})
    response = alice_client.get(f"/experiments/new/?clone={mine.pk}")
    initial = response.context["form"].initial
    assert initial["rounds"] == 9 and initial["data__alpha"] == 0.2
    assert initial["name"] == "base (copy)" and initial["tags"] == "x"
    theirs = make_experiment(other_user, name="secret")
    assert alice_client.get(f"/experiments/new/?clone={theirs.pk}").status_code == 404
