"""``/api/sweeps/``: create a sweep (all its runs or none), read it with each configuration's
mean ± std (and, for a search, each configuration's decisions, the best one and the compute used
against the full grid's), cancel it and delete it as a unit. The same rules as the pages, asked of
``access``.

Errors: 400 ``{"field": ["message"]}``, every bad field at once; expansion errors keyed by the spec
field and naming the point: ``{"spec.algorithm.mu": ["point mu=-1 seed=0: algorithm.mu must be >= 0"]}``,
a bad TPE range by its field: ``{"ranges.local.lr": ["ranges.local.lr: a log range needs low > 0, not 0"]}``."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.models import Team
from orchestrator.api.serializers import TeamAndVisibility
from orchestrator.experiments import access
from orchestrator.experiments.records import RoundMetric
from orchestrator.sweeps import overview
from orchestrator.sweeps.create import create_sweep
from orchestrator.sweeps.models import SWEEP_MODES, Sweep
from orchestrator.sweeps.stats import METRICS, group
from orchestrator.sweeps.sweep_error import SweepError


class SweepCreateSerializer(TeamAndVisibility, serializers.Serializer):
    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    tags = serializers.ListField(child=serializers.CharField(max_length=50), required=False, default=list)
    team = serializers.PrimaryKeyRelatedField(queryset=Team.objects.all(), required=False, allow_null=True)
    visibility = serializers.ChoiceField(choices=["private", "team"], required=False, default="private")
    spec = serializers.JSONField(help_text="The base spec every run shares; every field has a default")
    axes = serializers.JSONField(help_text='Swept fields and their values: {"algorithm.mu": [0, 1], "seed": [0, 1, 2]}')
    mode = serializers.ChoiceField(
        choices=SWEEP_MODES, required=False, default="grid", help_text="grid, random (a sample) or tpe (over ranges)"
    )
    # Checked together by sweeps.create.check, so a 400 lists every bad search setting at once.
    stopping = serializers.CharField(required=False, default="none", help_text="none, asha or median")
    search = serializers.JSONField(
        required=False, default=None,
        help_text='The search settings: {"first_rung": 3, "eta": 3, "last_k": 3, "target": "test_accuracy", '
        '"direction": "maximize"}; in tpe mode also "budget" and "ranges": {"local.lr": {"low": 0.001, '
        '"high": 0.5, "log": true}, "local.epochs": {"type": "int", "low": 1, "high": 3}, '
        '"algorithm.name": {"type": "choice", "choices": ["fedavg", "fedprox"]}}',
    )  # fmt: skip
    max_workers = serializers.JSONField(
        required=False, default=None, help_text="At most this many rounds of the sweep at once (workers); null: no cap"
    )
    samples = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)
    sample_seed = serializers.IntegerField(required=False, min_value=0, default=0)
    start = serializers.BooleanField(required=False, default=True, help_text="Queue every run at once")

    def create(self, data) -> Sweep:
        base, axes = data.pop("spec"), data.pop("axes")
        try:
            return create_sweep(owner=self.context["request"].user, base=base, axes=axes, **data)
        except SweepError as e:
            raise serializers.ValidationError(e.errors) from None


def sweep_body(sweep: Sweep, user) -> dict:
    """The sweep, its runs and one row per configuration with mean ± std of each metric."""
    experiments = list(sweep.experiments.select_related("trial").order_by("pk"))
    rounds: dict[int, list[dict]] = {e.pk: [] for e in experiments}
    for row in RoundMetric.objects.filter(experiment__sweep=sweep).order_by("experiment_id", "round"):
        rounds[row.experiment_id].append(row.to_result_dict())
    configurations = [
        {"config": r["config"], "runs": [e.pk for e in r["runs"]], "seeds": r["seeds"], "finished": r["finished"],
         "counted": r["counted"],
         **{m.key: {"mean": r[m.key][0], "std": r[m.key][1]} for m in METRICS}}
        for r in group(experiments, rounds, sweep.config_fields)
    ]  # fmt: skip
    return {
        "id": sweep.pk, "name": sweep.name, "description": sweep.description, "tags": sweep.tags,
        "owner": sweep.owner.username, "team": sweep.team_id, "visibility": sweep.visibility,
        "spec": sweep.base_spec, "axes": sweep.axes, "mode": sweep.mode, "samples": sweep.samples,
        "sample_seed": sweep.sample_seed, "created": sweep.created.isoformat(),
        "role": access.role_for(sweep, user), "can_control": access.can_control(sweep, user),
        "can_delete": access.can_delete(sweep, user),
        "stopping": sweep.stopping, "max_workers": sweep.max_workers,
        "experiments": [{"id": e.pk, "name": e.name, "status": e.status, "current_round": e.current_round,
                         "total_rounds": e.total_rounds, "trial": _number(e)} for e in experiments],
        "configurations": configurations,
        "search": overview.summary(sweep),
    }  # fmt: skip


def _number(experiment) -> int | None:
    return experiment.trial.number if experiment.trial_id is not None else None


@extend_schema(methods=["POST"], request=SweepCreateSerializer, responses={201: dict})
@extend_schema(methods=["GET"], responses=dict)
@api_view(["GET", "POST"])
def sweeps(request: Request) -> Response:
    """List the sweeps you may read, or create one (every run validated first; all or none stored)."""
    if request.method == "GET":
        qs = access.sweeps_visible_to(request.user).select_related("owner").prefetch_related("experiments")[:200]
        return Response([
            {"id": s.pk, "name": s.name, "axes": s.axes, "mode": s.mode, "stopping": s.stopping, "owner": s.owner.username,
             "experiments": [{"id": e.pk, "status": e.status} for e in s.experiments.all()]}
            for s in qs
        ])  # fmt: skip
    serializer = SweepCreateSerializer(data=request.data, context={"request": request})
    serializer.is_valid(raise_exception=True)
    sweep = serializer.save()
    return Response(sweep_body(access.get_sweep_for_user(request.user, sweep.pk), request.user), status=201)


@extend_schema(methods=["GET"], responses=dict)
@extend_schema(methods=["DELETE"], responses={204: None})
@api_view(["GET", "DELETE"])
def sweep(request: Request, pk: int) -> Response:
    if request.method == "DELETE":
        found = access.get_sweep_for_user(request.user, pk, delete=True)
        found.cancel(by=request.user.username)
        found.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(sweep_body(access.get_sweep_for_user(request.user, pk), request.user))


@extend_schema(request=None, responses=dict)
@api_view(["POST"])
def sweep_cancel(request: Request, pk: int) -> Response:
    """Cancel every run of the sweep that has not finished; ``cancelled`` says how many."""
    found = access.get_sweep_for_user(request.user, pk, control=True)
    cancelled = found.cancel(by=request.user.username)
    return Response({"cancelled": cancelled, **sweep_body(found, request.user)})
