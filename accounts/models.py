"""Teams, their members' roles, and invitations to join them.

A team owner manages members and invitations; owners and members create and control the team's
experiments; viewers only read them. Who may see or change an *experiment* is decided in
``orchestrator.experiments.access`` from these roles.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.urls import reverse
from django.utils import timezone


class Role(models.TextChoices):
    OWNER = "owner"  # manages the team, its members, and may delete any of its experiments
    MEMBER = "member"  # creates and controls the team's experiments
    VIEWER = "viewer"  # reads the team's experiments


CREATOR_ROLES = (Role.OWNER, Role.MEMBER)


class LastOwnerError(ValueError):
    """A team must keep at least one owner."""


class Team(models.Model):
    name = models.CharField(max_length=100)
    created = models.DateTimeField(default=timezone.now)
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def create_with_owner(cls, name: str, owner) -> Team:
        with transaction.atomic():
            team = cls.objects.create(name=name)
            Membership.objects.create(team=team, user=owner, role=Role.OWNER)
        return team

    def role_of(self, user) -> str | None:
        if not (user and user.is_authenticated):
            return None
        return self.memberships.filter(user=user).values_list("role", flat=True).first()

    def is_managed_by(self, user) -> bool:
        """Team owners (and superusers) change roles, remove members and invite people."""
        return bool(user and user.is_authenticated and (user.is_superuser or self.role_of(user) == Role.OWNER))

    def add_member(self, user, role: str) -> Membership:
        """Add ``user`` with ``role``; an existing member keeps the higher of the two roles."""
        membership, created = Membership.objects.get_or_create(team=self, user=user, defaults={"role": role})
        if not created and RANK[role] > RANK[membership.role]:
            membership.role = role
            membership.save(update_fields=["role"])
        return membership

    def _owners_besides(self, membership: Membership) -> int:
        return self.memberships.filter(role=Role.OWNER).exclude(pk=membership.pk).count()


RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.OWNER: 2}


class Membership(models.Model):
    team = models.ForeignKey(Team, models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team", "user__username"]
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"

    def set_role(self, role: str) -> None:
        if self.role == Role.OWNER and role != Role.OWNER and not self.team._owners_besides(self):
            raise LastOwnerError("A team needs at least one owner")
        self.role = role
        self.save(update_fields=["role"])

    def remove(self) -> None:
        if self.role == Role.OWNER and not self.team._owners_besides(self):
            raise LastOwnerError("A team needs at least one owner")
        self.delete()


def _new_token() -> str:
    return secrets.token_urlsafe(32)


def _default_expiry():
    return timezone.now() + timedelta(days=settings.INVITATION_DAYS)


class Invitation(models.Model):
    """A one-time link that lets whoever holds it join ``team`` with ``role``."""

    team = models.ForeignKey(Team, models.CASCADE, related_name="invitations")
    email = models.EmailField(blank=True)  # who it was meant for; the link itself is the credential
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    token = models.CharField(max_length=64, unique=True, default=_new_token)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    created = models.DateTimeField(default=timezone.now)
    expires = models.DateTimeField(default=_default_expiry)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"Invitation to {self.team} for {self.email or 'anyone'} ({self.role})"

    def get_absolute_url(self) -> str:
        return reverse("accept_invitation", args=[self.token])

    @property
    def is_usable(self) -> bool:
        return self.accepted_at is None and self.expires > timezone.now()

    def accept(self, user) -> Membership | None:
        """Make ``user`` a member. None if the link was used or expired meanwhile.

        Claimed with one conditional UPDATE so two simultaneous acceptances can't both win; call it
        inside the transaction that created ``user`` so a refused link leaves no orphan account.
        """
        now = timezone.now()
        claimed = Invitation.objects.filter(pk=self.pk, accepted_at__isnull=True, expires__gt=now).update(
            accepted_at=now, accepted_by=user
        )
        if not claimed:
            return None
        self.refresh_from_db()
        return self.team.add_member(user, self.role)
