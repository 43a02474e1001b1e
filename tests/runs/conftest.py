"""Runs for the runs-table tests: owned by whom, in which team, with which spec and test accuracies."""

from __future__ import annotations

import copy

import pytest

from orchestrator.models import Experiment, RoundMetric
from tests.conftest import TINY_SPEC
from tests.factories import round_result
from tests.web.conftest import alice_client  # noqa: F401


def spec_with(**sections) -> dict:
    """TINY_SPEC with some sections' fields replaced: ``spec_with(local={"lr": 0.1})``."""
    spec = copy.deepcopy(TINY_SPEC)
    for section, fields in sections.items():
        if isinstance(fields, dict):
            spec.setdefault(section, {}).update(fields)
        else:
            spec[section] = fields
    return spec


def make_run(owner, name: str, *, accuracies=(), status="completed", spec=None, **fields) -> Experiment:
    """A run whose round r has test accuracy ``accuracies[r - 1]`` (the factory's other values)."""
    experiment = Experiment.objects.create(owner=owner, name=name, spec=spec or TINY_SPEC, **fields)
    for n, accuracy in enumerate(accuracies, start=1):
        RoundMetric.record(experiment, round_result(n, test_accuracy=accuracy))
    Experiment.objects.filter(pk=experiment.pk).update(status=status, current_round=len(accuracies))
    experiment.refresh_from_db()
    return experiment


@pytest.fixture
def names():
    """The names of the runs rows of a list page, in order."""
    import re

    def read(response) -> list[str]:
        html = response.content.decode()
        return re.findall(r'<td class="run-name"><a href="/experiments/\d+/">([^<]*)</a>', html)

    return read
