import pytest
from django.urls import reverse

from accounts.models import LastOwnerError, Membership, Role, Team
from orchestrator.experiments import access
from tests.accounts.world import make_user, make_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return make_world()


def test_it_makes_the_creator_of_a_team_its_owner(client):
    alice = make_user("alice")
    client.force_login(alice)
    response = client.post(reverse("team_list"), {"name": "Speech"})
    team = Team.objects.get(name="Speech")
    assert response.status_code == 302 and response["Location"] == reverse("team_detail", args=[team.pk])
    assert team.role_of(alice) == Role.OWNER
    assert "Speech" in client.get(reverse("team_list")).content.decode()


def test_it_shows_a_team_to_its_members_only(client, world):
    url = reverse("team_detail", args=[world.team.pk])
    client.force_login(world.viewer)
    page = client.get(url)
    assert page.status_code == 200 and "mia" in page.content.decode()
    assert "Make invitation link" not in page.content.decode()  # viewers don't manage
    client.force_login(world.other)
    assert client.get(url).status_code == 404
    client.logout()
    assert client.get(url).status_code == 302


def test_it_lets_team_owners_change_roles(client, world):
    membership = Membership.objects.get(team=world.team, user=world.viewer)
    url = reverse("team_member_role", args=[world.team.pk, membership.pk])
    client.force_login(world.team_owner)
    assert client.post(url, {"role": "member"}).status_code == 302
    membership.refresh_from_db()
    assert membership.role == Role.MEMBER


@pytest.mark.parametrize("who", ["member", "viewer", "owner"])
def test_it_refuses_role_changes_by_non_owners(client, world, who):
    membership = Membership.objects.get(team=world.team, user=world.viewer)
    client.force_login(getattr(world, who))  # "owner" owns an experiment, but is only a team member
    response = client.post(reverse("team_member_role", args=[world.team.pk, membership.pk]), {"role": "owner"})
    assert response.status_code == 403
    membership.refresh_from_db()
    assert membership.role == Role.VIEWER


def test_it_hides_role_changes_from_outsiders(client, world):
    membership = Membership.objects.get(team=world.team, user=world.viewer)
    client.force_login(world.other)
    response = client.post(reverse("team_member_role", args=[world.team.pk, membership.pk]), {"role": "owner"})
    assert response.status_code == 404


def test_it_keeps_at_least_one_owner(client, world):
    only_owner = Membership.objects.get(team=world.team, user=world.team_owner)
    with pytest.raises(LastOwnerError):
        only_owner.set_role(Role.VIEWER)
    with pytest.raises(LastOwnerError):
        only_owner.remove()
    client.force_login(world.team_owner)
    client.post(reverse("team_member_role", args=[world.team.pk, only_owner.pk]), {"role": "viewer"})
    only_owner.refresh_from_db()
    assert only_owner.role == Role.OWNER


def test_it_lets_team_owners_remove_members_and_anyone_leave(client, world):
    viewer = Membership.objects.get(team=world.team, user=world.viewer)
    member = Membership.objects.get(team=world.team, user=world.member)
    client.force_login(world.member)
    assert client.post(reverse("team_member_remove", args=[world.team.pk, viewer.pk])).status_code == 403
    assert client.post(reverse("team_member_remove", args=[world.team.pk, member.pk])).status_code == 302  # leaves
    client.force_login(world.team_owner)
    assert client.post(reverse("team_member_remove", args=[world.team.pk, viewer.pk])).status_code == 302
    assert set(world.team.users.values_list("username", flat=True)) == {"tess", "olivia"}


def test_it_ends_access_to_team_experiments_with_the_membership(world):
    assert access.can_view(world.experiment, world.viewer)
    Membership.objects.get(team=world.team, user=world.viewer).remove()
    assert not access.can_view(world.experiment, world.viewer)


def test_it_keeps_the_higher_role_when_adding_an_existing_member(world):
    world.team.add_member(world.member, Role.VIEWER)
    assert world.team.role_of(world.member) == Role.MEMBER
    world.team.add_member(world.member, Role.OWNER)
    assert world.team.role_of(world.member) == Role.OWNER
