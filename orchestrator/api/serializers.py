"""REST API representations. Spec errors come back keyed by the dotted spec field:
``{"spec": {"data.alpha": ["data.alpha must be > 0"]}}``; other fields as DRF does it:
``{"name": ["This field is required."]}``."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from accounts.models import Team
from fedweb_engine.results.round_result import ROUND_RESULT_FIELDS
from fedweb_engine.spec.schema import Spec, SpecError
from fedweb_engine.spec.validation import each_error
from orchestrator.api import spec_schema  # noqa: F401 - spec_schema documents SpecField in the OpenAPI schema
from orchestrator.experiments import access
from orchestrator.experiments.launch import checked_spec, create_experiment
from orchestrator.experiments.models import Experiment, Visibility, check_team_visibility
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.queues import submit_warnings


def spec_error_body(error: SpecError) -> dict[str, list[str]]:
    """Every bad field of a spec with its messages: ``{"data.alpha": ["data.alpha must be > 0"], ...}``."""
    body: dict[str, list[str]] = {}
    for e in each_error(error):
        body.setdefault(e.field, []).append(str(e))
    return body


class SpecField(serializers.JSONField):
    """An experiment spec: plain JSON here; the OpenAPI schema documents its fields (orchestrator.api.spec_schema)."""


class ExperimentSerializer(serializers.ModelSerializer):
    spec = SpecField(read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    role = serializers.SerializerMethodField(
        help_text="What you are to it: owner, superuser, team owner, member, viewer"
    )
    can_control = serializers.SerializerMethodField()
    can_delete = serializers.SerializerMethodField()
    share_url = serializers.SerializerMethodField(help_text="The public read-only link; only for those who manage it")

    class Meta:
        model = Experiment
        fields = [
            "id", "name", "description", "tags", "notes", "owner", "team", "visibility", "status", "current_round",
            "total_rounds", "error", "worker", "created", "queued_at", "started", "finished", "spec",
            "role", "can_control", "can_delete", "share_url", "priority", "plugins",
        ]  # fmt: skip
        read_only_fields = fields

    def _user(self):
        return self.context["request"].user

    def get_role(self, experiment) -> str | None:
        return access.role_for(experiment, self._user())

    def get_can_control(self, experiment) -> bool:
        return access.can_control(experiment, self._user())

    def get_can_delete(self, experiment) -> bool:
        return access.can_delete(experiment, self._user())

    def get_share_url(self, experiment) -> str | None:
        path = access.share_path(experiment) if access.can_delete(experiment, self._user()) else None
        return path and self.context["request"].build_absolute_uri(path)


class ExperimentQueuedSerializer(ExperimentSerializer):
    """The answer to create, start and resume: the experiment, plus why it may wait."""

    warnings = serializers.SerializerMethodField(
        help_text="Why a queued run may not start soon, e.g. \"Queued on 'gpu': waiting for a worker serving gpu. "
        '..." or "no live worker has GPU 7". Empty when a live worker can take it. The run stays queued '
        "either way and starts when such a worker appears."
    )

    class Meta(ExperimentSerializer.Meta):
        fields = [*ExperimentSerializer.Meta.fields, "warnings"]
        read_only_fields = fields

    def get_warnings(self, experiment) -> list[str]:
        return submit_warnings(experiment)


class TeamAndVisibility:
    """The team/visibility checks every create serializer shares (experiments and sweeps)."""

    def validate_team(self, team):
        # Same answer for a team that doesn't exist and one you may not create in: no leak.
        if team is not None and not access.teams_for_creation(self.context["request"].user).filter(pk=team.pk).exists():
            raise serializers.ValidationError(f'Invalid pk "{team.pk}" - object does not exist.')
        return team

    def validate(self, data):
        try:
            check_team_visibility(data.get("visibility"), data.get("team"))
        except DjangoValidationError as e:
            raise serializers.ValidationError(e.message_dict) from None
        return data


class ExperimentCreateSerializer(TeamAndVisibility, serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False, default=list)
    team = serializers.PrimaryKeyRelatedField(queryset=Team.objects.all(), required=False, allow_null=True)
    visibility = serializers.ChoiceField(choices=Visibility.choices, required=False, default=Visibility.PRIVATE)
    spec = SpecField(help_text="The experiment spec; every field has a default")
    start = serializers.BooleanField(required=False, default=False, help_text="Queue it at once")

    def validate_spec(self, value) -> Spec:
        # Checked with the other fields, so one 400 lists every bad field; the checked Spec is what
        # create_experiment stores (it does not check it twice).
        try:
            return checked_spec(value)
        except SpecError as e:
            raise serializers.ValidationError(spec_error_body(e)) from None

    def create(self, data) -> Experiment:
        """``create_experiment``, where the spec is checked: a refusal is a 400 naming the field
        (``{"spec": {"data.alpha": ["..."]}}``), and nothing is stored."""
        try:
            return create_experiment(owner=self.context["request"].user, **data)
        except SpecError as e:
            raise serializers.ValidationError({"spec": spec_error_body(e)}) from None


class WordsSerializer(serializers.Serializer):
    """What PATCH changes (any of them); checked by ``edits.check_words``, errors keyed by field."""

    name = serializers.CharField(required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    notes = serializers.CharField(required=False, allow_blank=True, help_text="Markdown")


class RoundSerializer(serializers.ModelSerializer):
    class Meta:
        model = RoundMetric
        fields = list(ROUND_RESULT_FIELDS)
        read_only_fields = fields


class TeamSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    role = serializers.CharField(help_text="Your role in the team: owner, member or viewer")
