"""Who may see or change an experiment: the one place views, the API and consumers ask.

Views call ``get_experiment_for_user`` / ``get_experiment_for_request`` / ``get_experiment_for_token``
and never look up an Experiment by id themselves.

Rules (``role_for`` says what a user is to an experiment; ``can_view/can_control/can_delete`` the
rights of each role):

- private: the owner only (and superusers);
- team: the owner, and members of the experiment's team by role: team owners and members read
  and control it, viewers read it; team owners (and the experiment owner) delete it and change
  its sharing;
- public: as team, plus anyone holding the share link reads it (its share page, rounds CSV/JSON,
  report and WebSocket with ``?token=``), and nothing else;
- anyone else gets 404, so ids don't leak; an anonymous visitor is sent to log in.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.http import Http404
from django.urls import reverse

from accounts.models import CREATOR_ROLES, Membership, Team
from orchestrator.experiments.models import Experiment, Visibility
from orchestrator.live.events import WorkerEvent
from orchestrator.sweeps.models import Sweep

SCOPES = ("mine", "team", "shared")

# What a user is to an experiment (role_for); the rights of each are in can_*() below.
OWNER, SUPERUSER, TEAM_OWNER, MEMBER, VIEWER = "owner", "superuser", "team owner", "member", "viewer"
CONTROL_ROLES = (OWNER, SUPERUSER, TEAM_OWNER, MEMBER)
MANAGE_ROLES = (OWNER, SUPERUSER, TEAM_OWNER)
_TEAM_ROLES = {"owner": TEAM_OWNER, "member": MEMBER, "viewer": VIEWER}


def role_for(experiment: Experiment, user) -> str | None:
    """What ``user`` is to ``experiment``: owner, superuser, team owner, member, viewer or None.

    Team roles count only when the experiment is shared with its team (visibility team or
    public). A public link gives no role: link visitors are handled by ``shares_with(token)``.
    """
    if not (user and user.is_authenticated):
        return None
    if user.id == experiment.owner_id:
        return OWNER
    if user.is_superuser:
        return SUPERUSER
    if experiment.team_id is None or experiment.visibility == Visibility.PRIVATE:
        return None
    return _TEAM_ROLES.get(_team_role(experiment, user))


def _team_role(experiment: Experiment, user) -> str | None:
    # experiments_visible_to() annotates the role of the user it was asked for, which saves a
    # query per row in lists; the annotation is trusted only for that same user.
    if getattr(experiment, "access_user_id", None) == user.id:
        return experiment.access_team_role
    return Membership.objects.filter(team_id=experiment.team_id, user=user).values_list("role", flat=True).first()


def can_view(experiment: Experiment, user) -> bool:
    return role_for(experiment, user) is not None


def can_control(experiment: Experiment, user) -> bool:
    """Start, pause, resume, cancel; also clone into the same team."""
    return role_for(experiment, user) in CONTROL_ROLES


def can_delete(experiment: Experiment, user) -> bool:
    """Delete, and change the team, visibility and public link: the owner and team owners."""
    return role_for(experiment, user) in MANAGE_ROLES


def shares_with(experiment: Experiment, token: str | None) -> bool:
    """Does ``token`` open this experiment's public read-only link?"""
    return bool(
        token
        and experiment.visibility == Visibility.PUBLIC
        and experiment.share_token
        and secrets.compare_digest(experiment.share_token, token)
    )


def experiments_visible_to(user) -> QuerySet[Experiment]:
    """Every experiment ``user`` may read, in one query: own ones, or ones shared with a team the
    user belongs to. Each row carries the user's team role so ``can_*()`` need no more queries."""
    return _visible_to(Experiment, user)


def _visible_to(model, user) -> QuerySet:
    # Experiments and sweeps share the rule (owner, team, visibility): one query per list.
    if not (user and user.is_authenticated):
        return model.objects.none()
    # At most one membership per (team, user): no ORDER BY, which Membership's default ordering would
    # add with two joins to every row's subquery (a list of 10,000 runs spent most of its query on them).
    role = Membership.objects.filter(team=OuterRef("team"), user=user).order_by().values("role")[:1]
    qs = model.objects.annotate(
        access_team_role=Subquery(role), access_user_id=Value(user.id, output_field=IntegerField())
    )
    if user.is_superuser:
        return qs
    # The same rule as "has a team role" (access_team_role), written as membership of the row's team:
    # the database reads the user's teams once, where the role's subquery ran once per row (on a
    # 10,000-run table, most of the time of PostgreSQL's pass over it).
    teams = Membership.objects.filter(user=user).order_by().values("team")
    shared = Q(visibility__in=[Visibility.TEAM, Visibility.PUBLIC], team__in=teams)
    return qs.filter(Q(owner=user) | shared)


def visible_ids(user, ids: Iterable[int | None]) -> set[int]:
    """Those of ``ids`` (None is ignored) that ``user`` may read, in one query."""
    wanted = {pk for pk in ids if pk is not None}
    if not wanted:
        return set()
    return set(experiments_visible_to(user).filter(pk__in=wanted).values_list("pk", flat=True))


def workers_for_viewer(user, payloads: list[WorkerEvent]) -> list[WorkerEvent]:
    """Worker payloads as ``user`` may see them: which experiment a busy worker runs is shown only
    to those who may read that experiment (the Workers page and its socket both ask here)."""
    visible = visible_ids(user, [p["current_experiment_id"] for p in payloads])
    return [
        p if p["current_experiment_id"] in visible or p["current_experiment_id"] is None
        else {**p, "current_experiment_id": None, "current_experiment_name": ""}
        for p in payloads
    ]  # fmt: skip


def scoped(qs: QuerySet[Experiment], user, scope: str | None) -> QuerySet[Experiment]:
    """The list filters: ``mine`` (I own it), ``team`` (it belongs to one of my teams),
    ``shared`` (it has a public link). Anything else leaves ``qs`` as it is."""
    if scope == "mine":
        return qs.filter(owner=user)
    if scope == "team":
        return qs.filter(team__memberships__user=user)
    if scope == "shared":
        return qs.filter(visibility=Visibility.PUBLIC)
    return qs


def get_experiment_for_user(user, pk: int, *, control: bool = False, delete: bool = False) -> Experiment:
    """The experiment, if ``user`` may read it (404 otherwise, so ids don't leak); with
    ``control=True`` also require the right to change it, with ``delete=True`` the right to
    delete it or change its sharing (403)."""
    experiment = experiments_visible_to(user).select_related("owner", "team").filter(pk=pk).first()
    if experiment is None:
        raise Http404("No such experiment")
    if control and not can_control(experiment, user):
        raise PermissionDenied("You may view this experiment but not control it")
    if delete and not can_delete(experiment, user):
        raise PermissionDenied("Only the experiment's owner or a team owner may do this")
    return experiment


def get_experiment_for_token(token: str | None, pk: int | None = None) -> Experiment:
    """The experiment behind a public read-only link (404 for unknown or revoked tokens, and for
    a token of another experiment than ``pk``)."""
    if not token:
        raise Http404("No such link")
    experiment = Experiment.objects.select_related("owner", "team").filter(share_token=token).first()
    if experiment is None or not shares_with(experiment, token) or (pk is not None and experiment.pk != pk):
        raise Http404("No such link")
    return experiment


def get_experiment_for_request(request, pk: int) -> Experiment:
    """Read access for pages a public link also opens (rounds CSV/JSON, report): the signed-in
    user's rights, or else a ``?token=`` share token for this very experiment. Pair it with
    ``@login_or_share_token_required``."""
    token = request.GET.get("token")
    if request.user.is_authenticated:
        try:
            return get_experiment_for_user(request.user, pk)
        except Http404:
            if not token:
                raise
    return get_experiment_for_token(token, pk)


def login_or_share_token_required(view):
    """Like ``@login_required``, but lets a ``?token=`` through for ``get_experiment_for_request``."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.user.is_authenticated or request.GET.get("token"):
            return view(request, *args, **kwargs)
        return redirect_to_login(request.get_full_path())

    return wrapper


def teams_for_creation(user) -> QuerySet[Team]:
    """Teams ``user`` may create experiments in (and move experiments to): owner or member."""
    if not (user and user.is_authenticated):
        return Team.objects.none()
    if user.is_superuser:
        return Team.objects.all()
    return Team.objects.filter(memberships__user=user, memberships__role__in=CREATOR_ROLES)


def share_path(experiment: Experiment) -> str | None:
    """The path of the experiment's public link page, or None when it has no link."""
    if not experiment.share_token:
        return None
    return reverse("experiment_shared", args=[experiment.share_token])


# -- sweeps: the same roles and rights as an experiment (role_for reads owner, team and visibility) --


def sweeps_visible_to(user) -> QuerySet[Sweep]:
    """Every sweep ``user`` may read, each row annotated with the user's team role (one query)."""
    return _visible_to(Sweep, user)


def get_sweep_for_user(user, pk: int, *, control: bool = False, delete: bool = False) -> Sweep:
    """The sweep, if ``user`` may read it (404 otherwise); ``control``/``delete`` as for experiments (403)."""
    sweep = sweeps_visible_to(user).select_related("owner", "team").filter(pk=pk).first()
    if sweep is None:
        raise Http404("No such sweep")
    if control and not can_control(sweep, user):
        raise PermissionDenied("You may view this sweep but not control it")
    if delete and not can_delete(sweep, user):
        raise PermissionDenied("Only the sweep's owner or a team owner may do this")
    return sweep
