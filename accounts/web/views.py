"""Teams, members, invitations, API tokens and an experiment's sharing settings."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.api_tokens import current_token, revoke_token, rotate_token
from accounts.models import Invitation, LastOwnerError, Membership, Team
from accounts.web.forms import InviteForm, RoleForm, SharingForm, SignupForm, TeamForm
from orchestrator.experiments.access import get_experiment_for_user, share_path


def _get_team_for_user(request: HttpRequest, pk: int, *, manage: bool = False) -> Team:
    """The team if the user belongs to it (404 otherwise); ``manage`` also requires team owner."""
    team = get_object_or_404(Team, pk=pk)
    if not (request.user.is_superuser or team.role_of(request.user)):
        raise Http404("No such team")
    if manage and not team.is_managed_by(request.user):
        raise PermissionDenied("Only team owners may do this")
    return team


@login_required
def team_list(request: HttpRequest) -> HttpResponse:
    form = TeamForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        team = Team.create_with_owner(form.cleaned_data["name"], request.user)
        return redirect("team_detail", pk=team.pk)
    memberships = Membership.objects.filter(user=request.user).select_related("team")
    return render(request, "accounts/team_list.html", {"memberships": memberships, "form": form})


@login_required
def team_detail(request: HttpRequest, pk: int) -> HttpResponse:
    team = _get_team_for_user(request, pk)
    manages = team.is_managed_by(request.user)
    ctx = {
        "team": team,
        "manages": manages,
        "my_role": team.role_of(request.user),
        "memberships": team.memberships.select_related("user"),
        "invitations": team.invitations.filter(accepted_at__isnull=True) if manages else [],
        "invite_form": InviteForm(),
        "role_form": RoleForm(),
    }
    return render(request, "accounts/team_detail.html", ctx)


@login_required
@require_POST
def member_role(request: HttpRequest, pk: int, membership_id: int) -> HttpResponse:
    team = _get_team_for_user(request, pk, manage=True)
    membership = get_object_or_404(Membership, pk=membership_id, team=team)
    form = RoleForm(request.POST)
    if not form.is_valid():
        return HttpResponse("Unknown role", status=400)
    try:
        membership.set_role(form.cleaned_data["role"])
    except LastOwnerError as e:
        messages.error(request, str(e))
    return redirect("team_detail", pk=team.pk)


@login_required
@require_POST
def member_remove(request: HttpRequest, pk: int, membership_id: int) -> HttpResponse:
    team = _get_team_for_user(request, pk)
    membership = get_object_or_404(Membership, pk=membership_id, team=team)
    leaving = membership.user_id == request.user.id  # anyone may leave; owners remove others
    if not (leaving or team.is_managed_by(request.user)):
        raise PermissionDenied("Only team owners may remove members")
    try:
        membership.remove()
    except LastOwnerError as e:
        messages.error(request, str(e))
        return redirect("team_detail", pk=team.pk)
    return redirect("team_list") if leaving else redirect("team_detail", pk=team.pk)


@login_required
@require_POST
def invite(request: HttpRequest, pk: int) -> HttpResponse:
    team = _get_team_for_user(request, pk, manage=True)
    form = InviteForm(request.POST)
    if not form.is_valid():
        return HttpResponse("Invalid invitation", status=400)
    invitation = Invitation.objects.create(team=team, invited_by=request.user, **form.cleaned_data)
    messages.success(request, f"Invitation made: send its link (below) to {invitation.email or 'the new member'}")
    return redirect("team_detail", pk=team.pk)


@login_required
@require_POST
def invitation_revoke(request: HttpRequest, pk: int, invitation_id: int) -> HttpResponse:
    team = _get_team_for_user(request, pk, manage=True)
    get_object_or_404(Invitation, pk=invitation_id, team=team, accepted_at__isnull=True).delete()
    return redirect("team_detail", pk=team.pk)


def accept_invitation(request: HttpRequest, token: str) -> HttpResponse:
    """Join a team by link: a signed-in user confirms; anyone else creates an account here."""
    invitation = get_object_or_404(Invitation.objects.select_related("team"), token=token)
    if not invitation.is_usable:
        return render(request, "accounts/invitation_invalid.html", {"invitation": invitation}, status=410)
    form = (
        None if request.user.is_authenticated else SignupForm(request.POST or None, initial={"email": invitation.email})
    )
    if request.method == "POST" and (form is None or form.is_valid()):
        with transaction.atomic():
            user = request.user if form is None else form.save()
            if invitation.accept(user) is None:
                transaction.set_rollback(True)  # used or expired meanwhile: no orphan account
                return render(request, "accounts/invitation_invalid.html", {"invitation": invitation}, status=410)
        if form is not None:
            login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"You joined {invitation.team} as {invitation.role}")
        return redirect("team_detail", pk=invitation.team_id)
    return render(request, "accounts/accept_invitation.html", {"invitation": invitation, "form": form})


@login_required
def api_token(request: HttpRequest) -> HttpResponse:
    """Show the user's REST API token; POST ``action``: ``rotate`` (a new key, the old one dies at
    once; also makes the first one) or ``revoke`` (no key works until a new one is made)."""
    if request.method == "POST":
        action = request.POST.get("action", "rotate")
        if action == "revoke":
            revoke_token(request.user)
            messages.success(request, "Your token was revoked: API calls with it are refused from now on")
        elif action == "rotate":
            rotate_token(request.user)
            messages.success(request, "A new token was made; any old one no longer works")
        else:
            return HttpResponse("Unknown action: use rotate or revoke", status=400)
        return redirect("api_token")
    return render(request, "accounts/token.html", {"token": current_token(request.user)})


@login_required
def experiment_sharing(request: HttpRequest, pk: int) -> HttpResponse:
    """Team, visibility and the public link of an experiment: its owner and team owners."""
    experiment = get_experiment_for_user(request.user, pk, delete=True)
    form = SharingForm(request.POST or None, instance=experiment, user=request.user)
    if request.method == "POST":
        action = request.POST.get("action", "save")
        if action == "new_link":
            experiment.enable_public_link()
        elif action == "revoke_link":
            experiment.revoke_public_link()
        elif form.is_valid():
            form.save()
        else:
            return _render_sharing(request, experiment, form, status=400)
        return redirect("experiment_sharing", pk=experiment.pk)
    return _render_sharing(request, experiment, form)


def _render_sharing(request, experiment, form, status=200) -> HttpResponse:
    path = share_path(experiment)
    ctx = {"experiment": experiment, "form": form, "share_url": path and request.build_absolute_uri(path)}
    return render(request, "accounts/sharing.html", ctx, status=status)
