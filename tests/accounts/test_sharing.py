import pytest
from django.urls import reverse

from orchestrator.experiments import access
from orchestrator.experiments.models import Experiment
from tests.accounts.world import make_experiment, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


def test_it_moves_a_private_experiment_into_the_team(client, world):
    experiment = make_experiment(world.owner, name="solo")
    client.force_login(world.owner)
    url = reverse("experiment_sharing", args=[experiment.pk])
    assert client.get(url).status_code == 200
    assert not access.can_view(experiment, world.viewer)
    assert client.post(url, {"team": world.team.pk, "visibility": "team"}).status_code == 302
    experiment.refresh_from_db()
    assert (
        experiment.team == world.team and access.can_view(experiment, world.viewer) and experiment.share_token is None
    )


def test_it_refuses_team_visibility_without_a_team(client, world):
    experiment = make_experiment(world.owner, name="solo")
    client.force_login(world.owner)
    response = client.post(reverse("experiment_sharing", args=[experiment.pk]), {"team": "", "visibility": "team"})
    assert response.status_code == 400 and "visibility" in response.context["form"].errors
    assert Experiment.objects.get(pk=experiment.pk).visibility == "private"


def test_it_replaces_and_revokes_the_public_link(client, world):
    client.force_login(world.team_owner)  # a team owner manages the team's experiments' sharing
    url = reverse("experiment_sharing", args=[world.experiment.pk])
    old = world.experiment.share_token
    client.post(url, {"action": "new_link"})
    world.experiment.refresh_from_db()
    assert world.experiment.share_token not in (None, old)
    assert world.experiment.share_token in client.get(url).content.decode()
    client.post(url, {"action": "revoke_link"})
    world.experiment.refresh_from_db()
    assert world.experiment.share_token is None and world.experiment.visibility == "team"


def test_it_makes_a_link_when_saved_as_public(client, world):
    experiment = make_experiment(world.owner, name="solo")
    client.force_login(world.owner)
    client.post(reverse("experiment_sharing", args=[experiment.pk]), {"team": "", "visibility": "public"})
    experiment.refresh_from_db()
    assert experiment.visibility == "public" and len(experiment.share_token) >= 40


def test_it_does_not_let_viewers_only_members_or_others_change_sharing(client, world):
    url = reverse("experiment_sharing", args=[world.experiment.pk])
    for who, status in [("member", 403), ("viewer", 403), ("other", 404)]:
        client.force_login(getattr(world, who))
        assert client.post(url, {"action": "revoke_link"}).status_code == status
    world.experiment.refresh_from_db()
    assert world.experiment.share_token
