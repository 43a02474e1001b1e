from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from accounts.models import Invitation, Role
from tests.accounts.world import PASSWORD, make_user, make_world

pytestmark = pytest.mark.django_db

SIGNUP = {"username": "nina", "email": "nina@example.org", "password1": PASSWORD, "password2": PASSWORD}


@pytest.fixture
def world():
    return make_world()


@pytest.fixture
def invitation(world):
    return Invitation.objects.create(
        team=world.team, email="nina@example.org", role=Role.VIEWER, invited_by=world.team_owner
    )


def test_it_lets_team_owners_make_invitation_links(client, world):
    client.force_login(world.team_owner)
    response = client.post(reverse("team_invite", args=[world.team.pk]), {"email": "x@example.org", "role": "member"})
    assert response.status_code == 302
    invitation = Invitation.objects.get(team=world.team)
    assert invitation.role == Role.MEMBER and invitation.invited_by == world.team_owner
    assert len(invitation.token) >= 40 and invitation.expires > timezone.now() + timedelta(days=6)
    page = client.get(reverse("team_detail", args=[world.team.pk])).content.decode()
    assert f"/invite/{invitation.token}/" in page


@pytest.mark.parametrize("who", ["member", "viewer"])
def test_it_refuses_invitations_by_non_owners(client, world, who):
    client.force_login(getattr(world, who))
    response = client.post(reverse("team_invite", args=[world.team.pk]), {"role": "owner"})
    assert response.status_code == 403 and not Invitation.objects.exists()


def test_it_creates_the_user_and_membership_on_accept_and_logs_in(client, invitation, world):
    url = reverse("accept_invitation", args=[invitation.token])
    page = client.get(url)
    assert page.status_code == 200 and "Vision" in page.content.decode() and "viewer" in page.content.decode()
    response = client.post(url, SIGNUP)
    assert response.status_code == 302 and response["Location"] == reverse("team_detail", args=[world.team.pk])
    nina = get_user_model().objects.get(username="nina")
    assert world.team.role_of(nina) == Role.VIEWER and nina.check_password(PASSWORD)
    assert client.get(response["Location"]).status_code == 200  # logged in
    invitation.refresh_from_db()
    assert invitation.accepted_by == nina and invitation.accepted_at


def test_it_adds_a_signed_in_user_who_accepts(client, invitation, world):
    client.force_login(world.other)
    assert client.post(reverse("accept_invitation", args=[invitation.token])).status_code == 302
    assert world.team.role_of(world.other) == Role.VIEWER


def test_it_refuses_a_used_invitation(client, invitation):
    client.post(reverse("accept_invitation", args=[invitation.token]), SIGNUP)
    client.logout()
    again = {**SIGNUP, "username": "mallory"}
    response = client.post(reverse("accept_invitation", args=[invitation.token]), again)
    assert response.status_code == 410
    assert not get_user_model().objects.filter(username="mallory").exists()


def test_it_refuses_an_expired_invitation(client, invitation):
    Invitation.objects.filter(pk=invitation.pk).update(expires=timezone.now() - timedelta(seconds=1))
    url = reverse("accept_invitation", args=[invitation.token])
    assert client.get(url).status_code == 410
    assert client.post(url, SIGNUP).status_code == 410
    assert not get_user_model().objects.filter(username="nina").exists()


def test_it_leaves_no_account_when_the_link_is_used_meanwhile(client, invitation):
    # The link is claimed by someone else between the page load and this submission.
    page_loaded = Invitation.objects.get(pk=invitation.pk)
    page_loaded.accept(make_user("quick"))
    assert invitation.accept(make_user("slow")) is None
    assert invitation.team.role_of(get_user_model().objects.get(username="slow")) is None


def test_it_answers_404_for_unknown_tokens(client, invitation):
    assert client.get(reverse("accept_invitation", args=["not-a-token"])).status_code == 404


def test_it_shows_signup_errors_and_stores_nothing(client, invitation):
    response = client.post(reverse("accept_invitation", args=[invitation.token]), {**SIGNUP, "password2": "different"})
    assert response.status_code == 200 and "password2" in response.context["form"].errors
    assert not get_user_model().objects.filter(username="nina").exists()
    invitation.refresh_from_db()
    assert invitation.is_usable


def test_it_lets_team_owners_revoke_pending_invitations(client, invitation, world):
    client.force_login(world.team_owner)
    client.post(reverse("team_invitation_revoke", args=[world.team.pk, invitation.pk]))
    assert client.get(reverse("accept_invitation", args=[invitation.token])).status_code == 404
