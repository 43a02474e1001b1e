"""The buttons of an experiment's page: pause, resume, cancel (one view, as the API's
``experiment_action``), its priority and delete. POST only; controls need the right to control,
delete the right to delete."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from fedweb.inputs import int_value
from orchestrator.experiments.access import get_experiment_for_user
from orchestrator.fleet.priority import PriorityError, set_priority

ACTIONS = ("pause", "resume", "cancel")


@login_required
@require_POST
def experiment_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Pause, resume or cancel; a transition the status doesn't allow says so and changes nothing.
    Cancel cannot be undone, so the page asks first (the API's cancel is one call)."""
    if action not in ACTIONS:
        raise Http404(f"No such action: use one of {', '.join(ACTIONS)}")
    experiment = get_experiment_for_user(request.user, pk, control=True)
    if action == "cancel" and request.POST.get("confirm") != "yes":
        back = reverse("experiment_detail", args=[pk])
        context = {"target": experiment, "action": reverse("experiment_cancel", args=[pk]), "back": back}
        return render(request, "orchestrator/cancel_confirm.html", context)
    if not getattr(experiment, action)(by=request.user.username):
        messages.warning(request, f"Could not {action} an experiment that is {experiment.status}.")
    return redirect("experiment_detail", pk)


@login_required
@require_POST
def experiment_priority(request: HttpRequest, pk: int) -> HttpResponse:
    """The dashboard's priority form."""
    experiment = get_experiment_for_user(request.user, pk, control=True)
    try:
        set_priority(experiment, int_value(request.POST.get("priority")), by=request.user.username)
    except PriorityError as e:
        messages.error(request, str(e))
    return redirect("experiment_detail", pk)


@login_required
@require_POST
def experiment_delete(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, pk, delete=True)
    if request.POST.get("confirm") != "yes":
        return render(request, "orchestrator/experiment_delete.html", {"experiment": experiment})
    experiment.cancel(by=request.user.username)  # a round in flight then stops at its boundary
    name = experiment.name
    experiment.delete()
    messages.success(request, f"Deleted “{name}”.")
    return redirect("experiment_list")
