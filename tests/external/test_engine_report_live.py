"""A notebook's engine run reported to a real daphne with ``fedweb_client.report``: one call creates
the run, its rounds arrive with the engine's own figures under the standard names (the charts'),
and the run is finished."""

from __future__ import annotations

import json

import fedweb_client
import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from fedweb_engine import Simulation, Spec
from orchestrator.experiments.models import Experiment, Kind, Status
from orchestrator.experiments.records import RoundMetric
from orchestrator.external.models import CustomMetric

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SPEC = {
    "seed": 1,
    "rounds": 3,
    "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 8},
    "model": {"name": "logistic"},
    "participation": {"clients_per_round": 4},
    "evaluation": {"every": 2},  # rounds 2 and 3 (the last): round 1 has no test figures
    "compute": {"device": "cpu"},
}


def test_an_engine_run_is_reported_in_one_call_with_its_figures_under_the_standard_names(daphne, tmp_path):
    user = get_user_model().objects.create_user("dana", password="pw")
    token = Token.objects.create(user=user).key
    spec = Spec.from_dict(SPEC)
    results = Simulation(spec).run(progress=False)

    run = fedweb_client.report(
        f"http://{daphne}", token, "from a notebook", results, config=spec.to_dict(), journal=tmp_path / "j.jsonl"
    )

    assert run.sent == 3 and run.errors == []  # nothing dropped: text, lists and nulls are left out quietly
    experiment = Experiment.objects.get(pk=run.id)
    assert (experiment.kind, experiment.status, experiment.owner) == (Kind.EXTERNAL, Status.COMPLETED, user)
    assert experiment.total_rounds == 3 and experiment.spec == json.loads(json.dumps(spec.to_dict()))
    rows = list(RoundMetric.objects.filter(experiment=experiment).order_by("round"))
    assert [r.round for r in rows] == [1, 2, 3]
    for row, result in zip(rows, results, strict=True):
        for name in ("train_loss", "test_accuracy", "test_loss", "bytes_up", "bytes_down", "samples", "update_norm"):
            assert getattr(row, name) == pytest.approx(getattr(result, name)), name
    assert rows[0].test_accuracy is None and rows[2].test_accuracy is not None
    assert not CustomMetric.objects.filter(experiment=experiment).exists()  # every figure is a round field
