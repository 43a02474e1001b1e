"""The sweep form, page and API: one submission, field errors naming field and point, the table of
mean ± std per configuration, the band chart (one mean line per configuration) and parcoords."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.sweeps.create import create_sweep
from orchestrator.sweeps.models import Sweep
from tests.conftest import TINY_SPEC
from tests.factories import round_result
from tests.web.test_forms import form_data

pytestmark = pytest.mark.django_db
BASE = {**TINY_SPEC, "algorithm": {"name": "fedprox"}}


@pytest.fixture
def alice(client, user):
    client.force_login(user)
    return client


def _form(**overrides) -> dict:
    return {"name": "mu sweep", "base_spec": json.dumps(BASE), "axes": "algorithm.mu: 0, 0.01, 0.1, 1",
            "seeds": "0, 1, 2", "mode": "grid", "sample_seed": "0", "visibility": "private", **overrides}  # fmt: skip


def _finish(sweep: Sweep, accuracy_of) -> None:
    """Record 3 rounds for each run, the accuracy a function of (mu, seed)."""
    for e in sweep.experiments.all():
        for n in (1, 2, 3):
            mu = e.spec["algorithm"]["client"]["options"]["mu"]  # algorithm.mu: the fedprox client's option
            acc = accuracy_of(mu, e.spec["seed"]) * n / 3
            RoundMetric.record(e, round_result(n, test_accuracy=acc))
        Experiment.objects.filter(pk=e.pk).update(current_round=3, status="completed")


def test_it_creates_a_4_by_3_sweep_from_the_form(alice, enqueued):
    response = alice.post(reverse("sweep_new"), _form())
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("sweep_detail", args=[sweep.pk])
    assert sweep.experiments.count() == 12 and sweep.axes["seed"] == [0, 1, 2]


def test_it_puts_a_bad_swept_value_beside_the_axes_naming_the_point(alice):
    response = alice.post(reverse("sweep_new"), _form(axes="algorithm.mu: 0, -1"))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert "point mu=-1 seed=0: algorithm.mu" in errors["axes"][0]
    assert not Sweep.objects.exists() and not Experiment.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"base_spec": "{nope"}, "base_spec", "base spec is not valid JSON"),
        ({"base_spec": json.dumps({**BASE, "rounds": 0})}, "base_spec", "rounds must be"),
        ({"axes": "algorithm.mu 0, 1"}, "axes", "line 1 must read field: value"),
        ({"seeds": "0, -3"}, "seeds", "point mu=0 seed=-3: seed must be"),
        ({"mode": "random"}, "samples", "samples must be a whole number >= 1"),
    ],
)
def test_it_names_the_field_of_each_form_error(alice, overrides, field, message):
    response = alice.post(reverse("sweep_new"), _form(**overrides))
    assert message in " ".join(response.context["form"].errors[field])
    assert not Sweep.objects.exists()


def test_it_prefills_the_form_from_a_preset_and_from_a_cloned_sweep(alice, user, enqueued):
    page = alice.get(reverse("sweep_new") + "?preset=fedprox-stragglers")
    initial = page.context["form"].initial  # in the component fields: FedProx is the client algorithm
    assert initial["algorithm__client__name"] == "fedprox" and initial["algorithm__name"] == "fedavg"
    sweep = create_sweep(owner=user, name="mu", base=BASE, axes={"algorithm.mu": [0, 1], "seed": [4, 5]})
    initial = alice.get(reverse("sweep_new") + f"?clone={sweep.pk}").context["form"].initial
    assert initial["axes"] == "algorithm.mu: [0, 1]" and initial["seeds"] == "4, 5"
    assert initial["rounds"] == BASE["rounds"] and initial["name"] == "mu (copy)"
    assert "base_spec" not in initial  # the raw JSON stays an advanced option, empty unless filled


def test_it_creates_a_sweep_from_the_new_experiment_form_s_component_fields(alice, enqueued):
    fields = form_data(
        rounds="4",
        algorithm__client__name="fedprox",
        model__name="mlp",
        model__options__mlp__hidden="16",
        model__options__vgg__width="0",
    )  # fmt: skip  (a hidden component's input has no say)
    page = alice.get(reverse("sweep_new")).content.decode()
    assert 'id="field-model__options__mlp__hidden" data-applies-when=' in page  # the same conditional display
    sweep_fields = {"axes": "algorithm.mu: 0, 1", "seeds": "0", "mode": "grid", "sample_seed": "0"}
    response = alice.post(reverse("sweep_new"), {**fields, **sweep_fields, "name": "from fields"})
    assert response.status_code == 302, response.context["form"].errors
    sweep = Sweep.objects.get(name="from fields")
    assert sweep.base_spec["model"] == {"name": "mlp", "options": {"hidden": 16}} and sweep.base_spec["rounds"] == 4
    assert sorted(e.spec["algorithm"]["client"]["options"]["mu"] for e in sweep.experiments.all()) == [0.0, 1.0]

    bad = alice.post(reverse("sweep_new"), {**fields, **sweep_fields, "rounds": "0", "name": "bad"})
    assert "rounds must be >= 1" in " ".join(bad.context["form"].errors["rounds"])  # beside its own field
    assert not Sweep.objects.filter(name="bad").exists()


def test_it_shows_each_configuration_with_mean_and_std_sorted_by_final_accuracy(alice, user, enqueued):
    sweep = create_sweep(owner=user, name="mu", base=BASE, axes={"algorithm.mu": [0, 0.01, 0.1, 1], "seed": [0, 1, 2]})
    _finish(sweep, lambda mu, seed: 0.5 + 0.1 * mu + 0.01 * seed)  # mu=1 best; std over seeds 0.01
    page = alice.get(reverse("sweep_detail", args=[sweep.pk]))
    rows = page.context["rows"]
    assert [r["label"] for r in rows] == ["mu=1.0", "mu=0.1", "mu=0.01", "mu=0.0"]
    mean, std = rows[0]["final_accuracy"]
    assert mean == pytest.approx(0.61) and std == pytest.approx(0.01)
    assert "0.6100 ± 0.0100" in page.content.decode()
    figure = page.context["figures"]["sweep-test_accuracy"]
    means = [t for t in figure["data"] if t["meta"]["role"] == "mean"]
    assert len(means) == 4 and means[0]["y"] == pytest.approx([0.61 / 3, 0.61 * 2 / 3, 0.61])
    bands = [t for t in figure["data"] if t["meta"]["role"] == "lower"]
    assert all(t["fill"] == "tonexty" for t in bands) and len(bands) == 4
    parallel = page.context["figures"]["sweep-parallel"]["data"][0]
    assert [d["label"] for d in parallel["dimensions"]] == ["algorithm.mu", "final accuracy"]


def test_it_answers_the_api_with_the_configurations(client, user, enqueued):
    client.force_login(user)
    body = {"name": "api", "spec": BASE, "axes": {"algorithm.mu": [0, 1], "seed": [0, 1]}}
    created = client.post(reverse("api_sweeps"), body, content_type="application/json")
    assert created.status_code == 201, created.content
    data = created.json()
    assert len(data["experiments"]) == 4 and [c["config"] for c in data["configurations"]] == [
        {"algorithm.mu": 0.0}, {"algorithm.mu": 1.0}]  # fmt: skip
    bad = client.post(reverse("api_sweeps"), {**body, "axes": {"algorithm.mu": [-1]}}, content_type="application/json")
    assert bad.status_code == 400 and "spec.algorithm.mu" in bad.json()
    cancelled = client.post(reverse("api_sweep_cancel", args=[data["id"]]))
    assert cancelled.json()["cancelled"] == 4
    assert client.delete(reverse("api_sweep", args=[data["id"]])).status_code == 204
    assert not Experiment.objects.exists()


def test_it_groups_compared_runs_by_the_fields_that_differ(alice, user, enqueued):
    sweep = create_sweep(owner=user, name="mu", base=BASE, axes={"algorithm.mu": [0, 1], "seed": [0, 1]})
    _finish(sweep, lambda mu, seed: 0.4 + 0.2 * mu + 0.02 * seed)
    ids = ",".join(str(pk) for pk in sweep.experiments.values_list("pk", flat=True))
    page = alice.get(reverse("experiment_compare") + f"?ids={ids}&group=1")
    # The seed is pooled, not a group; the swept algorithm.mu is stored as the fedprox client's option.
    assert page.context["group_fields"] == ["algorithm.client.options.mu"]
    groups = {g["label"]: g for g in page.context["groups"]}
    assert set(groups) == {"mu=0.0", "mu=1.0"} and len(groups["mu=1.0"]["runs"]) == 2
    assert groups["mu=1.0"]["final_accuracy"][0] == pytest.approx(0.61)
    assert "0.6100 ± 0.0141" in page.content.decode()
    ungrouped = alice.get(reverse("experiment_compare") + f"?ids={ids}")
    assert "groups" not in ungrouped.context and 'id="group-runs"' in ungrouped.content.decode()


def test_it_asks_before_cancelling_every_run_of_a_sweep(alice, user, enqueued):
    sweep = create_sweep(owner=user, name="mu", base=BASE, axes={"algorithm.mu": [0, 1]})

    asked = alice.post(reverse("sweep_cancel", args=[sweep.pk]))

    assert asked.status_code == 200 and b"Its 2 unfinished runs stop" in asked.content
    assert set(sweep.experiments.values_list("status", flat=True)) == {"queued"}
    alice.post(reverse("sweep_cancel", args=[sweep.pk]), {"confirm": "yes"})
    assert set(sweep.experiments.values_list("status", flat=True)) == {"cancelled"}
