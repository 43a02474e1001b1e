"""Labels that say which is which: the form's component choices, the compare legend's and the run
names' fields, the ε heading, and what an old experiment that named FedProx on the server ran."""

from __future__ import annotations

import re

import pytest

from orchestrator.models import Experiment
from orchestrator.sweeps.expand import describe
from orchestrator.sweeps.stats import group, run_labels
from orchestrator.web.forms.experiment_forms import ExperimentForm
from tests.conftest import TINY_SPEC
from tests.web.conftest import make_experiment

pytestmark = pytest.mark.django_db


def test_it_labels_each_component_choice_by_what_it_selects():
    fields = ExperimentForm().fields
    labels = {name: fields[name].label for name in fields if name.endswith("__name")}

    assert labels == {
        "data__name": "Dataset",
        "model__name": "Model",
        "algorithm__name": "Server strategy",
        "algorithm__client__name": "Client algorithm",
        "communication__uplink__name": "Uplink codec",
        "communication__downlink__name": "Downlink codec",
    }
    assert fields["communication__uplink__options__topk__ratio"].label == "uplink ratio"
    assert fields["communication__downlink__options__topk__ratio"].label == "downlink ratio"


def _with_client(user, client: str) -> Experiment:
    spec = {**TINY_SPEC, "algorithm": {"name": "fedavg", "client": {"name": client}}}
    return make_experiment(user, name=client, spec=spec)


def test_the_compare_legend_and_the_groups_name_the_client_algorithm(user):
    runs = [_with_client(user, "scaffold"), _with_client(user, "fedavg")]

    assert run_labels(runs) == ["client=scaffold", "client=fedavg"]
    assert [row["label"] for row in group(runs, {}, ["algorithm.client.name"])] == [
        'client="scaffold"',
        'client="fedavg"',
    ]
    assert describe({"algorithm.client.name": "scaffold", "seed": 1}) == 'client="scaffold" seed=1'


def test_the_compare_legend_tells_the_server_strategy_from_the_client_algorithm(user):
    a = make_experiment(user, spec={**TINY_SPEC, "algorithm": {"name": "fedadam", "client": {"name": "scaffold"}}})
    b = make_experiment(user, spec={**TINY_SPEC, "algorithm": {"name": "fedavg", "client": {"name": "fedavg"}}})

    assert run_labels([a, b]) == [
        "client=scaffold strategy=fedadam server_optimizer=adam",
        "client=fedavg strategy=fedavg server_optimizer=sgd",
    ]


def test_an_old_run_that_named_fedprox_on_the_server_shows_what_it_ran(user, alice_client):
    # Stored before the server-side name went (a row the save path would no longer write).
    old = make_experiment(user, name="old prox")
    Experiment.objects.filter(pk=old.pk).update(spec={**TINY_SPEC, "algorithm": {"name": "fedprox", "mu": 0.5}})
    plain = make_experiment(user, name="plain")
    old.refresh_from_db()

    assert old.parsed_spec().algorithm.name == "fedavg" and old.parsed_spec().algorithm.mu == 0.5
    assert run_labels([old, plain]) == ["client=fedprox", "client=fedavg"]
    compared = alice_client.get(f"/compare/?ids={old.pk},{plain.pk}").context["differences"]
    assert ("algorithm.name", ["fedavg", "fedavg"]) not in compared
    assert ("algorithm.client.name", ["fedprox", "fedavg"]) in compared
    table = alice_client.get(f"/experiments/{old.pk}/").content.decode()
    assert "fedprox" in table and ">fedavg<" in table  # its spec table: the fedavg server step beside fedprox


def test_the_epsilon_heading_keeps_its_case(user, alice_client, enqueued):
    from orchestrator.sweeps.create import create_sweep

    sweep = create_sweep(owner=user, name="dp", base=TINY_SPEC, axes={"seed": [0, 1]})
    html = alice_client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'data-key="epsilon" title="Privacy spent (final ε)">Final <span class="keep-case">ε</span></th>' in html
    listing = alice_client.get("/?columns=epsilon").content.decode()
    heading = re.search(r'<th[^>]*data-col="epsilon"[^>]*>(.*?)</th>', listing, re.S).group(1)
    assert 'Final <span class="keep-case">ε</span>' in heading
