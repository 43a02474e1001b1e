"""Runs for the runs-table tests: owned by whom, in which team, with which spec and test accuracies
(the ``runs`` fixture: two teams and their runs, imported by the conftests that use it)."""

from __future__ import annotations

import copy

import pytest

from orchestrator.models import Experiment, RoundMetric
from tests.accounts.world import fast_password_hashing  # noqa: F401  (autouse)
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result


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
    experiment = new_experiment(owner=owner, name=name, spec=spec or TINY_SPEC, **fields)
    for n, accuracy in enumerate(accuracies, start=1):
        RoundMetric.record(experiment, round_result(n, test_accuracy=accuracy))
    Experiment.objects.filter(pk=experiment.pk).update(status=status, current_round=len(accuracies))
    experiment.refresh_from_db()
    return experiment


class Runs:
    """Two teams and their runs, for filters that must keep to what each user may read.

    Team Vision: alice and bob; team Audio: carol. Alice's runs are private; bob shares one with
    Vision and keeps one private; carol shares hers with Audio. ``ext`` is alice's external run,
    whose free-form config holds ``local.lr`` as text and which reported a custom metric."""

    def __init__(self, django_user_model):
        from accounts.models import Role, Team
        from orchestrator.external import ingest

        make = django_user_model.objects.create_user
        self.alice, self.bob, self.carol = (
            make("alice", password="pw"),
            make("bob", password="pw"),
            make("carol", password="pw"),
        )
        self.vision, self.audio = (
            Team.create_with_owner("Vision", self.alice),
            Team.create_with_owner("Audio", self.carol),
        )
        self.vision.add_member(self.bob, Role.MEMBER)
        fedavg = lambda lr: spec_with(local={"lr": lr})  # noqa: E731
        scaffold = lambda lr: spec_with(local={"lr": lr}, algorithm={"client": {"name": "scaffold"}})  # noqa: E731
        self.r1 = make_run(
            self.alice, "fedavg lr0.1", accuracies=[0.5, 0.7, 0.85, 0.9], spec=fedavg(0.1), tags=["baseline"]
        )
        self.r2 = make_run(
            self.alice, "scaffold lr0.1", accuracies=[0.6, 0.82, 0.8], spec=scaffold(0.1), tags=["scaffold"]
        )
        self.r3 = make_run(self.alice, "scaffold lr0.01", accuracies=[0.3, 0.4], spec=scaffold(0.01), status="running")
        self.r4 = make_run(
            self.bob, "bob shared", accuracies=[0.9], spec=scaffold(0.2), team=self.vision, visibility="team"
        )
        self.bob_private = make_run(self.bob, "bob private", accuracies=[0.99], spec=scaffold(0.3), tags=["baseline"])
        self.r5 = make_run(self.carol, "carol audio", accuracies=[0.95], spec=scaffold(0.3), team=self.audio,
                           visibility="team", tags=["baseline"])  # fmt: skip
        self.ext = Experiment.objects.create(owner=self.alice, name="ext script", kind="external", status="running",
                                             spec={"lr": 0.1, "local": {"lr": "fast"}})  # fmt: skip
        batch = [{"round": r, "metrics": {"accuracy": a, "grad/norm": g}} for r, a, g in ((1, 0.2, 3.0), (2, 0.3, 1.5))]
        ingest.record(self.ext.pk, ingest.parse_batch({"rounds": batch}))
        self.carol_ext = Experiment.objects.create(owner=self.carol, name="carol script", kind="external",
                                                   status="running", spec={"secret_knob": 1}, team=self.audio,
                                                   visibility="team")  # fmt: skip
        ingest.record(
            self.carol_ext.pk, ingest.parse_batch({"rounds": [{"round": 1, "metrics": {"secret/metric": 1}}]})
        )

    def by_name(self, names) -> list[Experiment]:
        return [Experiment.objects.get(name=n) for n in names]


@pytest.fixture
def runs(django_user_model) -> Runs:
    return Runs(django_user_model)
