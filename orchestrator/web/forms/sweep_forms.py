"""The new-sweep form: the base spec in the New experiment form's own component fields (with the
same conditional display; or, as an advanced option, raw JSON, which then replaces them), the swept
fields one per line (``algorithm.mu: 0, 0.01, 0.1, 1``), the seeds, and grid or seeded random
sampling, or a search (early stopping, TPE over ranges). ``clean()`` checks the sweep with
``sweeps.create.check``: the form accepts exactly what the API accepts."""

from __future__ import annotations

import json

from django import forms
from django.core.exceptions import ValidationError

from accounts.models import Team
from fedweb import inputs
from fedweb_engine.spec.schema import SpecError, option_key, spec_fields
from fedweb_engine.spec.validation import each_error
from orchestrator.experiments.access import teams_for_creation
from orchestrator.experiments.launch import checked_spec
from orchestrator.sweeps.create import check
from orchestrator.sweeps.models import SEED_FIELD, STOPPING, SWEEP_MODES
from orchestrator.sweeps.search_options import DEFAULTS
from orchestrator.sweeps.sweep_error import SweepError
from orchestrator.web.forms.experiment_forms import ExperimentForm, form_name
from orchestrator.web.forms.owned_forms import OwnedForm, TeamVisibilityChecks

AXES_HELP = "One swept field a line: algorithm.mu: 0, 0.01, 0.1, 1 (or a JSON list after the colon)."
RANGES_HELP = (
    "tpe: one field a line: local.lr: log 0.001..0.5 (log), algorithm.mu: 0..1 (linear), "
    "local.epochs: int 1..5 (whole numbers; int log 1..64), algorithm.name: choice fedavg, fedprox."
)
SEARCH_FIELDS = ("stopping", "first_rung", "eta", "last_k", "target", "direction", "max_workers", "budget", "ranges")


def parse_values(text: str) -> list:
    """``0, 0.01, fedavg`` or ``[0, 0.01]`` as a list; each item is JSON where it parses, else text."""
    text = text.strip()
    if text.startswith("["):
        try:
            values = inputs.loads(text)
        except inputs.JSONInputError:
            raise ValueError("is not a valid JSON list") from None
        if not isinstance(values, list):
            raise ValueError("must be a list")
        return values
    items = [item.strip() for item in text.split(",") if item.strip()]
    return [_scalar(item) for item in items]


def _scalar(item: str):
    try:
        return json.loads(item)
    except json.JSONDecodeError:
        return item  # a bare word: a choice such as fedavg


def parse_axes(text: str) -> dict[str, list]:
    """The axes textarea as {field: values}; ``ValueError`` naming the line that is not ``field: values``."""
    axes: dict[str, list] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        field, colon, values = line.partition(":")
        if not colon or not field.strip():
            raise ValueError(f"line {number} must read field: value, value, ...")
        try:
            axes[field.strip()] = parse_values(values)
        except ValueError as e:
            raise ValueError(f"line {number}: {field.strip()} {e}") from None
    return axes


def parse_range(text: str) -> dict:
    """``log 0.001..0.5``, ``0..1``, ``int 1..5``, ``int log 1..64`` or ``choice a, b`` as a range
    (``search_options.check_range`` judges its values); ``ValueError`` if it is none of these."""
    words = text.split()
    if words and words[0] == "choice":
        return {"type": "choice", "choices": parse_values(text.strip()[len("choice") :])}
    kind = "int" if words[:1] == ["int"] else "float"
    words = words[1:] if kind == "int" else words
    log = words[:1] == ["log"]
    words = words[1:] if log else words
    low, dots, high = " ".join(words).partition("..")
    if not dots or not low.strip() or not high.strip():
        raise ValueError("must read low..high, log low..high, int low..high or choice a, b")
    return {"type": kind, "low": _scalar(low.strip()), "high": _scalar(high.strip()), "log": log}


def parse_ranges(text: str) -> dict[str, dict]:
    """The ranges textarea as {field: range}; ``ValueError`` naming the line and its field."""
    ranges: dict[str, dict] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        field, colon, spec = line.partition(":")
        if not colon or not field.strip():
            raise ValueError(f"line {number} must read field: low..high")
        try:
            ranges[field.strip()] = parse_range(spec)
        except ValueError as e:
            raise ValueError(f"line {number}: {field.strip()} {e}") from None
    return ranges


def ranges_text(ranges: dict) -> str:
    """The ranges as the textarea shows them (a clone)."""
    lines = []
    for field, r in ranges.items():
        if r["type"] == "choice":
            lines.append(
                f"{field}: choice {', '.join(json.dumps(c) if not isinstance(c, str) else c for c in r['choices'])}"
            )
        else:
            words = (["int"] if r["type"] == "int" else []) + (["log"] if r["log"] else [])
            bounds = f"{r['low']}..{r['high']}"
            lines.append(f"{field}: {' '.join([*words, bounds])}")
    return "\n".join(lines)


def axes_text(axes: dict) -> str:
    """The axes as the textarea shows them (a clone), the seed left to its own field."""
    return "\n".join(f"{f}: {json.dumps(v)}" for f, v in axes.items() if f != SEED_FIELD)


class SweepForm(ExperimentForm):
    """The New experiment form's fields (the base spec every run shares) plus the sweep's own."""

    help_texts = {"team": "Share the sweep with a team you belong to."}

    base_spec = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "class": "mono"}),
        help_text="Advanced: the spec every run shares as JSON (fields left out take their defaults). "
        "When filled, it replaces the spec fields above.",
    )
    axes = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}), help_text=AXES_HELP
    )
    seeds = forms.CharField(required=False, help_text="Every configuration runs once per seed: 0, 1, 2.")
    mode = forms.ChoiceField(choices=[(m, m) for m in SWEEP_MODES], initial="grid",
                             help_text="grid: every combination; random: a seeded sample of it; "
                                       "tpe: model-based search over the ranges below.")  # fmt: skip
    samples = forms.IntegerField(required=False, min_value=1, help_text="random: how many configurations to draw.")
    sample_seed = forms.IntegerField(initial=0, min_value=0, required=False,
                                     help_text="random: the draw's seed; tpe: the sampler's.")  # fmt: skip
    stopping = forms.ChoiceField(choices=[(s, s) for s in STOPPING], initial="none", required=False,
                                 help_text="asha: successive halving over rounds; median: median stopping.")  # fmt: skip
    first_rung = forms.IntegerField(required=False, min_value=1, initial=DEFAULTS["first_rung"],
                                    help_text="The first decision after r rounds (median: every r rounds).")  # fmt: skip
    eta = forms.IntegerField(required=False, min_value=2, initial=DEFAULTS["eta"], label="η",
                             help_text="asha: each rung η× the rounds of the last; the top 1/η continue.")  # fmt: skip
    last_k = forms.IntegerField(required=False, min_value=1, initial=DEFAULTS["last_k"], label="last k",
                                help_text="Decide on the mean over seeds of the last k evaluated rounds.")  # fmt: skip
    target = forms.CharField(required=False, initial=DEFAULTS["target"], max_length=120,
                             help_text="A round field (test_accuracy, test_loss, train_loss...) or custom:<name>.")  # fmt: skip
    direction = forms.ChoiceField(choices=[("", "auto"), ("maximize", "maximize"), ("minimize", "minimize")],
                                  required=False, help_text="auto: maximize an accuracy, minimize anything else.")  # fmt: skip
    max_workers = forms.IntegerField(required=False, min_value=1, label="max workers",
                                     help_text="At most this many of the sweep's rounds at once; empty: no cap.")  # fmt: skip
    budget = forms.IntegerField(required=False, min_value=1, help_text="tpe: how many configurations to try.")
    ranges = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
                             help_text=RANGES_HELP)  # fmt: skip

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, user=user, **kwargs)
        self.sweep_args: dict = {}
        self.from_json = False
        # The sweep's own fields after the spec's (Django orders fields by declaration, parents first).
        own = ("base_spec", "axes", "seeds", "mode", "samples", "sample_seed", *SEARCH_FIELDS)
        self.order_fields([n for n in self.fields if n not in own] + list(own))

    def clean_base_spec(self) -> dict | None:
        if not self.cleaned_data["base_spec"].strip():
            return None  # the spec fields are the base
        try:
            spec = inputs.loads(self.cleaned_data["base_spec"])
        except inputs.JSONInputError as e:
            raise ValidationError(f"base spec is not valid JSON: {e}") from None
        if not isinstance(spec, dict):
            raise ValidationError("base spec must be a JSON object")
        return spec

    def clean_ranges(self) -> dict:
        try:
            return parse_ranges(self.cleaned_data["ranges"])
        except ValueError as e:
            raise ValidationError(f"ranges: {e}") from None

    def clean_axes(self) -> dict:
        try:
            return parse_axes(self.cleaned_data["axes"])
        except ValueError as e:
            raise ValidationError(f"axes: {e}") from None

    def clean_seeds(self) -> list | None:
        text = self.cleaned_data["seeds"].strip()
        if not text:
            return None
        try:
            return parse_values(text)
        except ValueError as e:
            raise ValidationError(f"seeds {e}") from None

    def clean(self):
        cleaned = OwnedForm.clean(self)  # name, tags, team and visibility; the runs' specs are judged below
        spec_names = {form_name(d) for d in spec_fields()} & set(self.fields)
        skipped = set(self._unselected_options())
        self.from_json = cleaned.get("base_spec") is not None
        for name in spec_names if self.from_json else skipped:
            self.errors.pop(name, None)  # the JSON replaces the fields; a hidden component's inputs have no say
        if "base_spec" in self.errors:
            return cleaned  # JSON that does not parse: no spec to judge
        cleaned["base_spec"] = cleaned["base_spec"] if self.from_json else self.spec_dict()
        if any(name in self.errors for name in ("axes", "seeds", "mode", "samples", "sample_seed")):
            self._judge_base(cleaned["base_spec"])  # no runs to expand, but the base's bad fields show now
            return cleaned
        axes = dict(cleaned["axes"])
        if cleaned.get("seeds") is not None:
            axes[SEED_FIELD] = cleaned["seeds"]
        args = {"base": cleaned["base_spec"], "axes": axes, "mode": cleaned["mode"], "samples": cleaned.get("samples"),
                "sample_seed": cleaned.get("sample_seed") or 0, "stopping": cleaned.get("stopping") or "none",
                "search": self._search(cleaned), "max_workers": cleaned.get("max_workers")}  # fmt: skip
        try:
            check(**args)  # the whole sweep: every run's spec, the search settings and ranges, at once
        except SweepError as e:
            unparsed = set(self.errors)  # an input that did not parse keeps its own error, not its default's
            for key, messages in e.errors.items():
                field = self._field_of(key, axes)
                if field is None or field not in unparsed:
                    self.add_error(field, messages)
        self.sweep_args = args
        return cleaned

    def _judge_base(self, base: dict) -> None:
        try:
            checked_spec(base)
        except SpecError as e:
            if self.from_json:
                self.add_error("base_spec", [str(one) for one in each_error(e)])
            else:
                self.add_spec_errors(e, base)

    def _search(self, cleaned: dict) -> dict:
        """The search settings the form was given (empty ones take their defaults)."""
        keys = ("first_rung", "eta", "last_k", "target", "direction")
        options = {k: cleaned[k] for k in keys if cleaned.get(k) not in (None, "")}
        if cleaned["mode"] == "tpe":
            options.update(budget=cleaned.get("budget"), ranges=cleaned.get("ranges") or {})
        return options

    def _field_of(self, key: str, axes: dict) -> str | None:
        """The form field an expansion error belongs beside: the swept field's line or the base spec."""
        if key in ("axes", "mode", "samples", "seeds", *SEARCH_FIELDS):
            return key
        if key.startswith("ranges."):
            return "ranges"
        if key == "search":
            return None
        dotted = key.removeprefix("spec.")
        if dotted == SEED_FIELD and SEED_FIELD in axes:
            return "seeds"
        if dotted in axes:
            return "axes"
        field = form_name(option_key(dotted, self.cleaned_data.get("base_spec") or {}))
        return field if not self.from_json and field in self.fields else "base_spec"


class SweepSharingForm(TeamVisibilityChecks, forms.Form):
    """A sweep's team and visibility (a sweep has no public link), changed after its creation; its
    runs follow it (``views.sweep_sharing.apply_sharing``)."""

    team = OwnedForm.base_fields["team"]
    visibility = OwnedForm.base_fields["visibility"]

    def __init__(self, *args, user=None, sweep=None, **kwargs):
        super().__init__(*args, **kwargs)
        teams = teams_for_creation(user)
        if sweep is not None and sweep.team_id:  # a team owner of someone else's team may keep it there
            teams = teams | Team.objects.filter(pk=sweep.team_id)
        self.fields["team"].queryset = teams.distinct()
