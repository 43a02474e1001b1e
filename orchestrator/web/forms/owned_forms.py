"""What every creation form asks besides its own content: a name, a description, tags, and with
whom it is shared (a team the user belongs to, and its visibility). The experiment and sweep
forms both build on :class:`OwnedForm`, so the two ask and check these the same way."""

from __future__ import annotations

from django import forms
from django.core.exceptions import ValidationError

from orchestrator.experiments.access import teams_for_creation
from orchestrator.experiments.models import check_team_visibility


class TeamVisibilityChecks:
    """The rules of every form that sets a team and a visibility (creation forms, a sweep's sharing)."""

    def clean_visibility(self) -> str:
        return self.cleaned_data["visibility"] or "private"

    def clean(self):
        cleaned = super().clean()
        try:
            check_team_visibility(cleaned.get("visibility"), cleaned.get("team"))
        except ValidationError as e:
            self.add_error(None, e)  # keyed by field: lands on "visibility"
        return cleaned


class OwnedForm(TeamVisibilityChecks, forms.Form):
    """Name, description, tags, team and visibility; ``help_texts`` lets a subclass word its own."""

    help_texts: dict[str, str] = {}

    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    tags = forms.CharField(required=False, help_text="Comma-separated.")
    team = forms.ModelChoiceField(queryset=None, required=False, help_text="Share it with a team you belong to.")
    visibility = forms.ChoiceField(
        choices=[("private", "private: only me"), ("team", "team: the team's members, by role")],
        initial="private",
        required=False,
    )

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams_for_creation(user)  # only teams the user may create in
        for name, text in self.help_texts.items():
            self.fields[name].help_text = text

    def clean_tags(self) -> list[str]:
        tags = [t.strip() for t in self.cleaned_data["tags"].split(",")]
        return list(dict.fromkeys(t for t in tags if t))
