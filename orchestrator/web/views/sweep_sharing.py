"""A sweep after its creation: its sharing page (team and visibility, applied to its runs) and the
JSON its live page refetches when the sweep socket (``orchestrator.sockets.sweeps``) says a run changed."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from orchestrator.experiments import access
from orchestrator.experiments.models import Visibility
from orchestrator.web.forms.sweep_forms import SweepSharingForm
from orchestrator.web.views.sweeps import sweep_context


def apply_sharing(sweep, team, visibility: str) -> None:
    """Share ``sweep`` and its runs with ``team`` at ``visibility``. Each run is saved (not updated
    in bulk) so that its open sockets, and the sweep's, check their access again. A run made public
    keeps its link while the sweep is shared with the team (public includes the team)."""
    sweep.team, sweep.visibility = team, visibility
    sweep.save(update_fields=["team", "visibility"])
    for run in sweep.experiments.all():
        run.team = team
        keep_public = run.visibility == Visibility.PUBLIC and visibility == Visibility.TEAM
        run.visibility = Visibility.PUBLIC if keep_public else visibility
        run.save(update_fields=["team", "visibility"])


@login_required
def sweep_sharing(request: HttpRequest, pk: int) -> HttpResponse:
    """Team and visibility of a sweep: its owner and team owners."""
    sweep = access.get_sweep_for_user(request.user, pk, delete=True)
    initial = {"team": sweep.team, "visibility": sweep.visibility}
    form = SweepSharingForm(request.POST or None, initial=initial, user=request.user, sweep=sweep)
    if request.method == "POST":
        if form.is_valid():
            apply_sharing(sweep, form.cleaned_data["team"], form.cleaned_data["visibility"])
            return redirect("sweep_sharing", pk=sweep.pk)
        return render(request, "orchestrator/sweep_sharing.html", {"sweep": sweep, "form": form}, status=400)
    return render(request, "orchestrator/sweep_sharing.html", {"sweep": sweep, "form": form})


@login_required
@require_GET
def sweep_live(request: HttpRequest, pk: int) -> JsonResponse:
    """The parts of the sweep page that change as runs go: progress, table rows and figures."""
    sweep = access.get_sweep_for_user(request.user, pk)
    ctx = sweep_context(sweep)
    return JsonResponse({
        "progress": render_to_string("orchestrator/_sweep_progress.html", ctx, request),
        "rows": render_to_string("orchestrator/_sweep_rows.html", ctx, request),
        "search": render_to_string("orchestrator/_sweep_search.html", ctx, request),
        "figures": ctx["figures"],
        "parallel_pending": ctx["parallel_pending"],
        "active": ctx["active"],
        "finished": ctx["finished"],
    })  # fmt: skip
