"""The new-experiment page's side panel: one JSON answer per box (resources, bandwidth, privacy,
partition), each computed from the form fields that box reads.

A box is not held hostage by a field it does not read: an invalid field outside the box's own is
set to its default for that box's computation (``rounds must be >= 1`` says nothing about the
partition), so is a field outside it that breaks a rule with one of its own (per-client evaluation
without a client test split says nothing about the bandwidth), and a box whose own fields are
invalid answers 400 with ``why`` (its fields' errors).
A field a box reads only for its whole-run totals (``rounds`` for bandwidth) is "soft": the box
still answers, and names it in ``unknown`` so that the page blanks those totals and says why.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse, QueryDict

from fedweb_engine.spec.schema import Spec, SpecError, spec_fields
from orchestrator.experiments.launch import checked_spec
from orchestrator.web.estimates import bandwidth_estimate, partition_preview, privacy_estimate, resource_estimate
from orchestrator.web.forms.experiment_forms import ExperimentForm, form_name

# The spec fields (dotted prefixes) each box is computed from.
BOX_FIELDS = {
    "partition": ("data", "seed"),
    "resources": ("data", "model", "local", "compute", "participation", "algorithm", "communication"),
    "bandwidth": ("data", "model", "communication", "participation"),
    "privacy": ("privacy", "rounds", "participation", "data", "local"),
}
SOFT_FIELDS = {"bandwidth": ("rounds",)}
MAX_PASSES = 3  # a default can clash with another field (clients per round > clients): try again


def _reads(prefixes: tuple[str, ...], key: str) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def box_form(query: QueryDict, box: str, user) -> tuple[ExperimentForm, Spec | None, dict[str, list[str]]]:
    """The preview form for ``box``, with every invalid field the box does not read set to its
    default; its checked spec (None when a field the box reads is invalid); and the defaulted
    fields' errors, by dotted name."""
    data = query.copy()
    defaulted: dict[str, list[str]] = {}
    reads = BOX_FIELDS[box]
    form = ExperimentForm(data, preview=True, user=user)
    for _ in range(MAX_PASSES):
        if (spec := _checked(form)) is not None:
            return form, spec, defaulted
        outside = {k: v for k, v in form.spec_errors().items() if k != "__all__" and not _reads(reads, k)}
        # A rule broken between a field the box reads and one it does not (a client test split of 0
        # with per-client evaluation on, for the bandwidth): the box takes the other one's default.
        for e in form.engine_errors:
            others = [r for r in e.related if not _reads(reads, r)]
            if _reads(reads, e.field) and others and len(others) == len(e.related):
                outside.update({r: [str(e)] for r in others})
        if not outside:
            return form, None, defaulted
        for key, errors in outside.items():
            _set_default(data, key)
            defaulted.setdefault(key, errors)
        form = ExperimentForm(data, preview=True, user=user)
    return form, _checked(form), defaulted


def _checked(form: ExperimentForm) -> Spec | None:
    """The form's spec, checked as ``create_experiment`` checks a new one (a preview stores
    nothing); None when the form or the spec is invalid, the spec's error then on the form."""
    if not form.is_valid():
        return None
    spec = form.spec_dict()
    try:
        return checked_spec(spec)
    except SpecError as e:
        form.add_spec_error(e, spec)
        return None


def _set_default(data: QueryDict, dotted: str) -> None:
    """Put the engine's default of ``dotted`` into the form data, as its input would hold it."""
    meta = spec_fields().get(dotted)
    name = form_name(dotted)
    default = meta["default"] if meta else None
    if default is None or default is False:
        data.pop(name, None)  # empty, or an unchecked box
    elif default is True:
        data[name] = "on"
    elif isinstance(default, list):
        data[name] = ", ".join(map(str, default))
    else:
        data[name] = str(default)


def answer(request: HttpRequest, box: str, compute) -> JsonResponse:
    """``compute(spec)`` for ``box``, or 400 with the errors of the fields it reads and ``why``."""
    form, spec, defaulted = box_form(request.GET, box, request.user)
    if spec is None:
        errors = form.spec_errors()
        return JsonResponse({"errors": errors, "why": _why(errors)}, status=400)
    try:
        body = compute(spec)
    except SpecError as e:
        errors = {e.field: [str(e)]}
        return JsonResponse({"errors": errors, "why": _why(errors)}, status=400)
    unknown = {k: v for k, v in defaulted.items() if _reads(SOFT_FIELDS.get(box, ()), k)}
    return JsonResponse({**(body if isinstance(body, dict) else {"value": body}), "unknown": unknown})


def _why(errors: dict[str, list[str]]) -> str:
    return "; ".join(message for messages in errors.values() for message in messages)


@login_required
def preview_resources(request: HttpRequest) -> JsonResponse:
    return answer(request, "resources", resource_estimate)


@login_required
def preview_bandwidth(request: HttpRequest) -> JsonResponse:
    return answer(request, "bandwidth", bandwidth_estimate)


@login_required
def preview_privacy(request: HttpRequest) -> JsonResponse:
    return answer(request, "privacy", lambda spec: {"privacy": privacy_estimate(spec)})


@login_required
def preview_partition(request: HttpRequest) -> JsonResponse:
    return answer(request, "partition", partition_preview)
