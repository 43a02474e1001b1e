"""Editing a run's words after its creation: name, description, tags and Markdown notes, by anyone who
may change the run; each change is recorded with who made it and when (``Experiment.edit_words``)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from orchestrator.experiments import access
from orchestrator.experiments.access import get_experiment_for_user
from orchestrator.web.forms.runs_forms import WordsForm
from orchestrator.web.views.pages import dashboard_context


@login_required
@require_POST
def experiment_words(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_experiment_for_user(request.user, pk, control=True)
    form = WordsForm(request.POST)
    if form.is_valid():
        try:
            changed = experiment.edit_words(request.user, form.cleaned_data)
        except ValidationError as e:
            for field, errors in e.message_dict.items():
                form.add_error(field if field in form.fields else None, errors)
        else:
            messages.success(request, f"Saved: {', '.join(changed)}." if changed else "Nothing changed.")
            return redirect("experiment_detail", pk)
    # The reader's text stays in the form, with the errors beside it.
    ctx = dashboard_context(experiment, can_control=True, ws_url=f"/ws/experiments/{pk}/", user=request.user)
    ctx.update(words_form=form, words_open=True, can_delete=access.can_delete(experiment, request.user))
    return render(request, "orchestrator/experiment_detail.html", ctx, status=400)
