from __future__ import annotations

import pytest

from orchestrator.experiments.models import Experiment, Kind
from orchestrator.experiments.records import RoundMetric
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result


def make_experiment(owner, *, rounds: int = 0, name: str = "tiny", spec: dict | None = None, **fields) -> Experiment:
    if fields.get("kind") == Kind.EXTERNAL:  # its spec is a script's config, which nothing checks
        experiment = Experiment.objects.create(owner=owner, name=name, spec=spec or {}, **fields)
    else:
        experiment = new_experiment(owner=owner, name=name, spec=spec or TINY_SPEC, **fields)
    for n in range(1, rounds + 1):
        RoundMetric.record(experiment, round_result(n))
    if rounds:
        Experiment.objects.filter(pk=experiment.pk).update(current_round=rounds)
        experiment.refresh_from_db()
    return experiment


@pytest.fixture
def alice_client(client, user):
    client.force_login(user)
    return client


from tests.runs.world import runs  # noqa: E402, F401  (two teams and their runs: test_runs_page.py)
