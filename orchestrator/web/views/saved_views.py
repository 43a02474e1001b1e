"""Saving the runs table: the columns a user picks (remembered per user) and named views, kept for
oneself or shared with one of one's teams. A view is only a query and a layout: whoever opens it
sees the runs they may read. Only a view's owner changes or deletes it."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import IntegrityError, transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.views.decorators.http import require_POST

from orchestrator.runs.saved import SavedView, TablePrefs, views_for
from orchestrator.web.forms.runs_forms import RunsTableForm, SavedViewForm
from orchestrator.web.views.runs import params_of


def _table(request: HttpRequest) -> RunsTableForm:
    """The table the POST describes (the page's current parameters), validated like the page's."""
    return RunsTableForm(request.POST, user=request.user)


def _back(params: dict) -> HttpResponse:
    response = redirect("experiment_list")
    response["Location"] += "?" + urlencode(params) if params else ""
    return response


@login_required
@require_POST
def table_columns(request: HttpRequest) -> HttpResponse:
    """The column picker: remember the columns (and target) for this user, and show the table with them."""
    form = _table(request)
    if not form.is_valid():
        for field, errors in form.error_dict().items():
            messages.error(request, f"{field}: {errors[0]}")
        return redirect("experiment_list")
    spec = form.table_spec()
    TablePrefs.objects.update_or_create(
        user=request.user, defaults={"columns": [c.name for c in spec.columns], "target": spec.ctx.target}
    )
    return _back({k: v for k, v in params_of(form, spec).items() if v})


def _get_view_for_owner(user, pk: int) -> SavedView:
    view = SavedView.objects.filter(pk=pk, owner=user).first()
    if view is None:  # another's view, shared or not, is not theirs to change: no leak either way
        raise Http404("No such view of yours")
    return view


@login_required
@require_POST
def view_save(request: HttpRequest) -> HttpResponse:
    """Save the table under a name (replacing the user's view of that name), shared with a team or not."""
    form, table_form = SavedViewForm(request.POST, user=request.user), _table(request)
    if not (form.is_valid() and table_form.is_valid()):
        errors = {**form.errors, **table_form.errors}
        for field, error in errors.items():
            messages.error(request, f"Not saved: {field}: {error[0]}")
        return _back({k: v for k, v in request.POST.items() if k in ("q", "columns", "group", "sort", "target")})
    spec = table_form.table_spec()
    fields = {
        "team": form.cleaned_data["team"],
        "query": spec.query,
        "columns": [c.name for c in spec.columns],
        "group": [c.name for c in spec.group],
        "sort": f"{'-' if spec.descending else ''}{spec.sort.name}" if spec.sort else "",
        "target": spec.ctx.target,
        "updated": timezone.now(),
    }
    try:
        with transaction.atomic():
            view, _ = SavedView.objects.update_or_create(
                owner=request.user, name=form.cleaned_data["name"], defaults=fields
            )
    except IntegrityError:  # the same name saved twice at once: the other one won
        view = SavedView.objects.get(owner=request.user, name=form.cleaned_data["name"])
    shared = f", shared with {view.team.name}" if view.team else ""
    messages.success(request, f"Saved the view “{view.name}”{shared}.")
    return _back(view.params())


@login_required
@require_POST
def view_delete(request: HttpRequest, pk: int) -> HttpResponse:
    view = _get_view_for_owner(request.user, pk)
    view.delete()
    messages.success(request, f"Deleted the view “{view.name}”.")
    return redirect("experiment_list")


@login_required
def view_open(request: HttpRequest, pk: int) -> HttpResponse:
    """Open a view the user may read (their own, or one shared with a team of theirs)."""
    view = views_for(request.user).filter(pk=pk).first()
    if view is None:
        raise Http404("No such view")
    return _back({k: v for k, v in view.params().items() if v})
