"""The runs table's parameters (``q``, ``columns``, ``group``, ``sort``, ``target``, ``page``...) as
one form, which the page, its CSV download and ``GET /api/experiments/`` all validate with: each
``clean_*`` returns the domain value (a parsed query, ``Column``s), and each error names its
parameter, the field or operator at fault and the nearest known name. The forms of saved views,
of the column picker and of a run's words are here too."""

from __future__ import annotations

import math

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q

from accounts.models import Team
from orchestrator.experiments.access import SCOPES
from orchestrator.runs.conditions import Context, to_q
from orchestrator.runs.edits import clean_tags
from orchestrator.runs.jsonsql import JsonHas
from orchestrator.runs.query import QueryError, parse
from orchestrator.runs.saved import DEFAULT_TARGET
from orchestrator.runs.table import TableSpec, vocabulary_for
from orchestrator.runs.vocabulary import DEFAULT_COLUMNS, Column

PER_PAGE = 50
MAX_PER_PAGE = 500
MAX_COLUMNS = 40
MAX_GROUP = 2


def _names(raw: str, what: str, limit: int) -> list[str]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if len(names) > limit:
        raise ValidationError(f"at most {limit} {what}, not {len(names)}")
    return list(dict.fromkeys(names))


class RunsTableForm(forms.Form):
    q = forms.CharField(required=False, strip=True)
    columns = forms.CharField(required=False)
    group = forms.CharField(required=False)
    sort = forms.CharField(required=False)
    target = forms.CharField(required=False)
    page = forms.IntegerField(required=False, min_value=1, max_value=10**6)
    per_page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PER_PAGE)
    scope = forms.ChoiceField(required=False, choices=[("", "all"), *((s, s) for s in SCOPES), ("all", "all")])
    # Older links' and scripts' filters, the same as q's "status = x" and "tag:x".
    status = forms.CharField(required=False)
    tag = forms.CharField(required=False)

    def __init__(self, data, *, user, default_columns=DEFAULT_COLUMNS, default_target=DEFAULT_TARGET):
        if hasattr(data, "getlist"):  # the page's two "group" selects send the parameter twice
            groups = ",".join(g for g in data.getlist("group") if g)
            data = {**{k: data.get(k) for k in data}, "group": groups}
        super().__init__(data)
        self.vocabulary = vocabulary_for(user)
        self.default_columns, self.default_target = default_columns, default_target

    def _column(self, name: str) -> Column:
        try:
            return self.vocabulary.get(name)
        except QueryError as e:
            raise ValidationError(str(e)) from None

    def clean_q(self):
        try:
            return parse(self.cleaned_data["q"])
        except QueryError as e:
            raise ValidationError(str(e)) from None

    def clean_columns(self) -> list[Column]:
        names = _names(self.cleaned_data["columns"], "columns", MAX_COLUMNS)
        if names:
            return [self._column(n) for n in names]
        # The saved defaults: a name that no longer means anything (a plugin gone) is left out.
        columns = []
        for name in self.default_columns:
            try:
                columns.append(self.vocabulary.get(name))
            except QueryError:
                continue
        return columns

    def clean_group(self) -> list[Column]:
        columns = [self._column(n) for n in _names(self.cleaned_data["group"], "group columns", MAX_GROUP)]
        for c in columns:
            if not c.groupable:
                raise ValidationError(f"{c.name} cannot group runs (group by a spec field, status, owner, team, sweep...)")  # fmt: skip
        return columns

    def clean_sort(self) -> tuple[Column | None, bool]:
        raw = self.cleaned_data["sort"].strip()
        if not raw:
            return None, True
        descending = raw.startswith("-")
        return self._column(raw.lstrip("-+")), descending

    def clean_target(self) -> float:
        raw = self.cleaned_data["target"].strip()
        if not raw:
            return self.default_target
        try:
            target = float(raw)
        except ValueError:
            raise ValidationError(f'target is a test accuracy such as 0.8, not "{raw[:40]}"') from None
        if not math.isfinite(target) or not 0 <= target <= 1:
            raise ValidationError(f"target is a test accuracy between 0 and 1, not {raw[:40]}")
        return target

    def clean(self):
        cleaned = super().clean()
        if "q" in cleaned and "target" in cleaned:  # the names and values the query uses, judged now
            ctx = Context(self.vocabulary, target=cleaned["target"])
            try:
                cleaned["condition"] = to_q(cleaned["q"], ctx) & _older_filters(cleaned)
            except QueryError as e:
                self.add_error("q", str(e))
            cleaned["ctx"] = ctx
        return cleaned

    def table_spec(self) -> TableSpec:
        """The validated table (call after ``is_valid()``)."""
        data = self.cleaned_data
        sort, descending = data["sort"]
        scope = data["scope"] if data["scope"] in SCOPES else None
        return TableSpec(data["ctx"], data["condition"], (self.data.get("q") or "").strip(), data["columns"],
                         data["group"], sort, descending, scope)  # fmt: skip

    def error_dict(self) -> dict[str, list[str]]:
        return {name: [str(m) for m in messages] for name, messages in self.errors.items()}


def _older_filters(cleaned: dict) -> Q:
    condition = Q(status=cleaned["status"]) if cleaned.get("status") else Q()
    return condition & Q(JsonHas("tags", cleaned["tag"])) if cleaned.get("tag") else condition


class SavedViewForm(forms.Form):
    """Save the table as it is shown under a name, for oneself or shared with one of one's teams."""

    name = forms.CharField(max_length=100)
    team = forms.ModelChoiceField(queryset=Team.objects.none(), required=False)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = Team.objects.filter(memberships__user=user)


class WordsForm(forms.Form):
    """A run's name, description, tags (comma-separated) and Markdown notes."""

    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    notes = forms.CharField(widget=forms.Textarea(attrs={"rows": 8}), required=False, help_text="Markdown.")

    def clean_tags(self) -> list[str]:
        try:
            return clean_tags(self.cleaned_data["tags"].split(","))
        except ValidationError as e:
            raise ValidationError(e.message_dict["tags"]) from None
