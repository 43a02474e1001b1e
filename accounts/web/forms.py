from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from accounts.models import Role, Team
from orchestrator.experiments.access import teams_for_creation
from orchestrator.experiments.models import Experiment


class TeamForm(forms.ModelForm):
    class Meta:
        model = Team
        fields = ["name"]


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class InviteForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Who the link is for (a note; the link is the key).")
    role = forms.ChoiceField(choices=Role.choices, initial=Role.MEMBER)


class SignupForm(UserCreationForm):
    """A new account made through an invitation link."""

    email = forms.EmailField(required=False)

    class Meta(UserCreationForm.Meta):
        fields = ["username", "email"]


class SharingForm(forms.ModelForm):
    """Team and visibility of an experiment; the link itself is made and revoked by buttons."""

    class Meta:
        model = Experiment
        fields = ["team", "visibility"]

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        teams = teams_for_creation(user)
        if self.instance.team_id:  # a team owner of someone else's team may keep it where it is
            teams = teams | Team.objects.filter(pk=self.instance.team_id)
        self.fields["team"].queryset = teams.distinct()
        self.fields["team"].required = False
        # "Team visibility needs a team" is checked by Experiment.clean(), which a ModelForm runs.
