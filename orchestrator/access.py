"""Who may see or change an experiment: the one place views, the API and consumers ask.

Views call ``get_experiment_for_user`` / ``get_experiment_for_token`` and never look up an
Experiment by id themselves. Rules (owner-only until teams and sharing land):
read = ``Experiment.can_view(user)``; control = ``Experiment.can_control(user)``.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from orchestrator.models import Experiment


def experiments_visible_to(user) -> QuerySet[Experiment]:
    """Every experiment ``user`` may read."""
    if not (user and user.is_authenticated):
        return Experiment.objects.none()
    if user.is_superuser:
        return Experiment.objects.all()
    return Experiment.objects.filter(owner=user)


def get_experiment_for_user(user, pk: int, *, control: bool = False) -> Experiment:
    """The experiment, if ``user`` may read it (404 otherwise, so ids don't leak); with
    ``control=True`` also require the right to change it (403)."""
    experiment = experiments_visible_to(user).select_related("owner").filter(pk=pk).first()
    if experiment is None:
        raise Http404("No such experiment")
    if control and not experiment.can_control(user):
        raise PermissionDenied("You may view this experiment but not change it")
    return experiment


def get_experiment_for_token(token: str) -> Experiment:
    """The experiment behind a public read-only link (404 for unknown or revoked tokens)."""
    raise Http404("Public links are not enabled yet")
