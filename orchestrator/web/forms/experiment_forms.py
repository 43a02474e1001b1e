"""The new-experiment form: one field per spec field, generated from the engine's ``spec_fields()``.

Field names are the dotted spec names with ``__`` for the dot (``data__alpha``), so an engine
``SpecError("data.alpha", ...)`` lands next to the right input. A component's options are one
field per registered component and option (``model__options__vgg__width``), shown only while
that component is selected; only the selected component's options go into the spec, and an
error on ``model.options.width`` lands on the selected component's input. ``spec_dict()`` is the
spec the inputs describe; ``clean()`` has the engine check it (``checked_spec``) and puts every
refusal beside its input at once; ``save()`` hands the checked spec to ``create_experiment``, which
stores and queues it: what the form accepts is exactly what the engine runs, and a view only
handles the form.
"""

from __future__ import annotations

import json
from typing import NamedTuple

from django import forms
from django.conf import settings

from fedweb import inputs
from fedweb_engine.spec.components import COMPONENT_LABELS
from fedweb_engine.spec.schema import COMPONENT_PATHS, SECTIONS, Spec, SpecError, option_key, spec_fields
from fedweb_engine.spec.validation import each_error
from orchestrator.experiments.launch import checked_spec, create_experiment
from orchestrator.experiments.models import Experiment
from orchestrator.web.forms.owned_forms import OwnedForm

# Derived from the algorithm; showing it would only let the two disagree.
HIDDEN_SPEC_FIELDS = {"algorithm.server_optimizer"}
GENERAL_FIELDS = ("seed", "rounds")


def form_name(dotted: str) -> str:
    return dotted.replace(".", "__")


def spec_field(dotted: str, meta: dict) -> forms.Field:
    """A form field for one spec field: choices → select, bool → checkbox, numbers → number input."""
    kind, default, help_text = meta["type"], meta["default"], meta["help"]
    shown_default = "none" if default is None else json.dumps(default)
    common = {
        "label": _label(dotted),
        "help_text": f"{help_text} Default: {shown_default}.",
        "error_messages": {"required": f"{dotted} is required"},
    }
    if dotted == "participation.schedule":
        common["help_text"] = f"{help_text} Paste a list: 108, 113, 93 or [108, 113, 93]. Empty: the fixed count."
        return ScheduleField(required=False, **common)
    if meta["choices"]:
        choices = [(c, c) for c in meta["choices"]]
        coerce = int if kind == "int" else str
        allowed = ", ".join(map(str, meta["choices"]))
        common["error_messages"]["invalid_choice"] = f"{dotted} must be one of {allowed}, not %(value)s"
        return forms.TypedChoiceField(choices=choices, coerce=coerce, **common)
    if kind == "bool":
        return forms.BooleanField(required=False, **common)
    common["error_messages"]["invalid"] = f"{dotted} must be a {'whole number' if kind == 'int' else 'number'}"
    # The engine's bounds as a hint in the help and on the input; the engine still judges the value.
    attrs = {k: meta[k] for k in ("min", "max") if meta.get(k) is not None and not (k == "min" and meta["min_open"])}
    if meta.get("max") is not None:
        # Only the bounds that exist (a plugin may give max alone): never "Range: >= None". A bound
        # that other fields tighten is not promised bare: 65,536 hidden units are refused by the
        # parameter limit with the default dataset.
        bounds = [] if meta.get("min") is None else [f"{'>' if meta['min_open'] else '>='} {meta['min']}"]
        bounds.append(f"<= {meta['max']:,}")
        common["help_text"] += f" Range: {', '.join(bounds)}{limit_note(dotted, meta)}."
    if kind == "int":
        return forms.IntegerField(widget=forms.NumberInput(attrs=attrs), **common)
    if kind == "float":
        return forms.FloatField(widget=forms.NumberInput(attrs={"step": "any", **attrs}), **common)
    return forms.CharField(required=meta["nullable"] is False and default is not None, **common)


def _label(dotted: str) -> str:
    """The input's label: what a component choice selects (Server strategy, Uplink codec), a link
    codec's option with its link (uplink ratio), any other field by its name."""
    path, _, last = dotted.rpartition(".")
    if last == "name" and path in COMPONENT_LABELS:
        return COMPONENT_LABELS[path][0]
    link = next(
        (p for p in ("communication.uplink", "communication.downlink") if dotted.startswith(p + ".options.")), None
    )
    name = last.replace("_", " ")
    return f"{COMPONENT_LABELS[link][1]} {name}" if link else name


# Fields whose largest accepted value depends on other fields (the engine's bound is only the outer one).
_OTHER_LIMITS = {
    "participation.clients_per_round": ", and at most data.num_clients",
    "evaluation.cohort_size": ", and at most data.num_clients",
    "local.batch_size": "; larger batches also count against this server's memory-per-round limit",
    "compute.client_group_size": "; larger groups also count against this server's memory-per-round limit",
    "evaluation.batch_size": "; larger batches also count against this server's memory-per-round limit",
    "model.options.vgg.blocks": None,  # sizes the model like a size option
}


def limit_note(dotted: str, meta: dict) -> str:
    """How other fields tighten ``dotted``'s range, as the end of its "Range:" help ("" when they do not): a model or dataset size
    option is bounded by this server's limits on parameters and memory, which depend on the
    dataset, the model and the batch sizes together (the Resources box shows where a spec stands)."""
    if meta.get("size") or (dotted in _OTHER_LIMITS and _OTHER_LIMITS[dotted] is None):
        return (
            f" where this server's limits allow it (at most {settings.FEDWEB_MAX_PARAMS:,} parameters and a"
            " bounded memory per round, for the model and dataset chosen together: the Resources box shows"
            " the estimate)"
        )
    return _OTHER_LIMITS.get(dotted) or ""


def _dig(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d.get(part) if isinstance(d, dict) else None
    return d


class ScheduleField(forms.CharField):
    """A per-round cohort schedule pasted as ``108, 113, 93`` or as a JSON list."""

    def to_python(self, value):
        text = (super().to_python(value) or "").strip()
        if not text:
            return None
        if text.startswith("["):
            try:
                items = inputs.loads(text)
            except inputs.JSONInputError:
                raise forms.ValidationError("participation.schedule is not a valid JSON list") from None
        else:
            items = [item for item in text.replace(";", ",").replace("\n", ",").replace(" ", ",").split(",") if item]
        try:
            return [int(str(item)) for item in items]
        except ValueError:
            raise forms.ValidationError("participation.schedule must be a list of whole numbers") from None

    def prepare_value(self, value):
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return value


def fieldsets(*, advanced: bool = False) -> list[tuple[str, list[str]]]:
    """(section, [form field names]) in spec order, the general fields first: the fields the
    engine's metadata marks ``advanced`` (``advanced=True``) or the others. Empty sections are left out."""
    meta = spec_fields()
    sets = [("general", [form_name(f) for f in GENERAL_FIELDS if meta[f]["advanced"] == advanced])]
    for section in SECTIONS:
        dotted = [d for d in meta if d.startswith(section + ".") and d not in HIDDEN_SPEC_FIELDS]
        sets.append((section, [form_name(d) for d in dotted if meta[d]["advanced"] == advanced]))
    return [(section, names) for section, names in sets if names]


def applies_when_attr(dotted: str) -> str:
    """The engine's ``applies_when`` rule of ``dotted`` in the page's terms (form names, values as
    the inputs hold them), as JSON for a ``data-applies-when`` attribute; "" for always."""
    rule = spec_fields()[dotted]["applies_when"]
    if rule is None:
        return ""
    as_form = [{form_name(f): [str(v) for v in values] for f, values in alt.items()} for alt in rule]
    return json.dumps(as_form)


class ShownField(NamedTuple):
    """A bound field with what its wrapper in the template needs."""

    field: forms.BoundField
    applies_when: str  # JSON rule, "" when the field always applies
    wide: bool
    applied_default: str = ""  # the value the page fills in when the rule starts to hold (the engine's too)


def spec_initial(spec: dict) -> dict:
    """Form initial values from a (partial) spec dict; the engine's defaults fill the rest.

    A stored spec (a clone) is loaded without today's bounds; the form then flags what is over them.
    """
    full = Spec.from_stored(spec).to_dict()
    initial = {}
    for dotted, meta in spec_fields().items():
        if meta.get("option"):  # the selected component's value, the others' defaults
            path = dotted.rsplit(".options.", 1)[0]
            section = _at(full, path)
            chosen = section["name"] == meta["component"]
            initial[form_name(dotted)] = section["options"][meta["option"]] if chosen else meta["default"]
        else:
            initial[form_name(dotted)] = _at(full, dotted)
    return initial


def _at(d: dict, dotted: str):
    for part in dotted.split("."):
        d = d[part]
    return d


def _put(d: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        d = d.setdefault(part, {})
    d[last] = value


class ExperimentForm(OwnedForm):
    help_texts = {
        "tags": "Comma-separated, e.g. baseline, fedprox.",
        "visibility": "A public read-only link can be made on the experiment's Sharing page.",
    }

    def __init__(self, *args, preview: bool = False, user=None, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        self.user = user
        if preview:  # the live previews only need the spec
            for name in ("name", "description", "tags"):
                self.fields[name].required = False
        for dotted, meta in spec_fields().items():
            if dotted not in HIDDEN_SPEC_FIELDS:
                self.fields[form_name(dotted)] = spec_field(dotted, meta)
        self.spec: Spec | None = None
        self.engine_errors: list[SpecError] = []  # the engine's own, with the fields each rule ties

    def clean(self):
        cleaned = super().clean()  # name, tags, team and visibility (OwnedForm)
        for name in self._unselected_options():
            self.errors.pop(name, None)  # a hidden component's inputs have no say in the spec
        # The engine judges the spec even when some inputs did not parse (they take their defaults
        # there), so one submit shows every bad field beside it, not one per submit.
        spec = self.spec_dict()
        try:
            spec_object = checked_spec(spec)
        except SpecError as e:
            self.engine_errors = each_error(e)
            self.add_spec_errors(e, spec)
        else:
            if not self.errors:
                self.spec = spec_object  # carried as it is to create_experiment (save)
        return cleaned

    def add_spec_errors(self, error: SpecError, spec: dict) -> None:
        """Each of the engine's errors beside its input; one on an input that already has an error
        of its own (it did not parse) is left out, as the engine judged that input's default."""
        unparsed = set(self.errors)
        for e in each_error(error):
            field = form_name(option_key(e.field, spec))
            if field not in self.fields:
                self.add_error(None, str(e))
            elif field not in unparsed:
                self.add_error(field, str(e))

    def save(self) -> Experiment:
        """Store the valid form's experiment, owned by its user, and queue it: its spec as ``clean``
        parsed and checked it, not parsed again."""
        fields = {k: self.cleaned_data[k] for k in ("team", "visibility", "name", "description", "tags")}
        return create_experiment(owner=self.user, spec=self.spec, **fields)

    def add_spec_error(self, error: SpecError, spec: dict) -> None:
        """``error`` beside the input of its field (the selected component's, for an option), else
        above the form."""
        field = form_name(option_key(error.field, spec))
        self.add_error(field if field in self.fields else None, str(error))

    def spec_dict(self) -> dict:
        """The spec the inputs describe, in today's shape: only the selected components' options."""
        spec: dict = {}
        fields = spec_fields()
        skipped = set(self._unselected_options())
        for dotted, meta in fields.items():
            if dotted in HIDDEN_SPEC_FIELDS or form_name(dotted) in skipped:
                continue
            if form_name(dotted) in self.errors or form_name(dotted) not in self.cleaned_data:
                continue  # did not parse: the engine's default stands in for it
            value = self.cleaned_data.get(form_name(dotted))
            if value == "" and meta["nullable"]:
                value = None
            if meta.get("option"):
                path = dotted.rsplit(".options.", 1)[0]
                _put(spec, f"{path}.options.{meta['option']}", value)
            else:
                _put(spec, dotted, value)
        for path in COMPONENT_PATHS:  # a component without options still gets its (empty) options
            if isinstance(_dig(spec, path), dict):
                _dig(spec, path).setdefault("options", {})
        return spec

    def _unselected_options(self) -> list[str]:
        """Form names of the option inputs of components other than the selected ones."""
        data = self.cleaned_data if hasattr(self, "cleaned_data") else {}
        out = []
        for dotted, meta in spec_fields().items():
            if meta.get("option"):
                path = dotted.rsplit(".options.", 1)[0]
                selected = data.get(form_name(f"{path}.name"))
                if selected != meta["component"]:
                    out.append(form_name(dotted))
        return out

    def fieldsets(self, advanced: bool = False) -> list[tuple[str, list[ShownField]]]:
        """[(section, [shown fields])] for the template: the main ones, or the ``advanced`` fold's."""
        return [(section, [self._shown(n) for n in names]) for section, names in fieldsets(advanced=advanced)]

    def advanced_fieldsets(self) -> list[tuple[str, list[ShownField]]]:
        return self.fieldsets(advanced=True)

    def advanced_has_errors(self) -> bool:
        """Whether a folded field has an error (the page then keeps the fold open)."""
        return any(self[name].errors for _, names in fieldsets(advanced=True) for name in names)

    def _shown(self, name: str) -> ShownField:
        dotted = name.replace("__", ".")
        applied = spec_fields()[dotted].get("applied_default")
        return ShownField(
            self[name],
            applies_when_attr(dotted),
            wide=dotted == "participation.schedule",
            applied_default="" if applied is None else json.dumps(applied),
        )

    def spec_errors(self) -> dict[str, list[str]]:
        """Errors keyed by dotted spec name ("__all__" for the rest), for the preview endpoints."""
        return {key.replace("__", ".") if key != "__all__" else key: list(errs) for key, errs in self.errors.items()}
