"""A small organisation for access tests: one team with an owner, a member and a viewer, an
experiment owner in that team, an outsider and a superuser. Made by code in each test's setup."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model

from accounts.models import Role, Team
from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import RoundMetric
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment, round_result

PASSWORD = "correct horse battery"


@dataclass
class World:
    owner: object  # owns the experiment; a member of the team
    team_owner: object
    member: object
    viewer: object
    other: object  # signed in, no relation to anything
    superuser: object
    team: Team
    experiment: Experiment  # in the team, visibility "public", with a share link


def metrics(r: int) -> dict:
    return round_result(r, train_loss=1.0 / r, bytes_down=10, bytes_up=5, bytes_formula=20)


def make_user(username: str, **extra):
    return get_user_model().objects.create_user(username, password=PASSWORD, **extra)


def make_experiment(owner, *, team=None, visibility="private", name="matrix-exp-a", rounds=2) -> Experiment:
    experiment = new_experiment(owner=owner, team=team, visibility=visibility, name=name, spec=TINY_SPEC)
    for r in range(1, rounds + 1):
        RoundMetric.record(experiment, metrics(r))
    Experiment.objects.filter(pk=experiment.pk).update(current_round=rounds)
    experiment.refresh_from_db()
    return experiment


def make_world() -> World:
    owner, team_owner = make_user("olivia"), make_user("tess")
    member, viewer, other = make_user("mia"), make_user("vic"), make_user("oscar")
    superuser = get_user_model().objects.create_superuser("root", password=PASSWORD)
    team = Team.create_with_owner("Vision", team_owner)
    team.add_member(owner, Role.MEMBER)
    team.add_member(member, Role.MEMBER)
    team.add_member(viewer, Role.VIEWER)
    experiment = make_experiment(owner, team=team, visibility="public")
    return World(owner, team_owner, member, viewer, other, superuser, team, experiment)


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    # PBKDF2's deliberate slowness costs ~0.25 s a user: six users a test would dominate the suite.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
