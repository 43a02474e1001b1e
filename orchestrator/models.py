"""Experiments and their state machine. Every model of the app is importable from here: the rows a
run leaves behind (RoundMetric, Checkpoint, LogEntry) live in ``records.py``, Worker in ``fleet.py``;
who may see or change an experiment is ``access.py``'s.

The state machine of an experiment lives here. Every transition is one conditional UPDATE
(``filter(status__in=...).update(...)``) so that the web process and any number of workers can
race on the same row and exactly one of them wins.
"""

from __future__ import annotations

import copy
import secrets
import shutil
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.db.models.signals import post_delete
from django.dispatch import Signal, receiver
from django.utils import timezone

from orchestrator.experiments.limits import check_new_spec
from orchestrator.experiments.records import Checkpoint, LogEntry, RoundMetric, checkpoint_folder
from orchestrator.experiments.states import ACTIVE, FINISHED, Kind, Status, Visibility, check_team_visibility
from orchestrator.external.models import CustomMetric, ExternalRun, MlflowExperiment, MlflowRun
from orchestrator.fleet.sharding import RoundShard
from orchestrator.fleet.workers import Worker, pick_queue
from orchestrator.sweeps.models import Sweep
from workers.engine.provenance import spec_provenance
from workers.engine.spec import Spec, SpecError

__all__ = [
    "ACTIVE", "FINISHED", "Checkpoint", "check_team_visibility", "CustomMetric", "Experiment", "ExternalRun", "Kind",
    "LogEntry", "MlflowExperiment", "MlflowRun", "RoundMetric", "RoundShard", "Status", "Visibility", "Worker", "Sweep", "checkpoint_folder",
]  # fmt: skip


def validate_spec(value) -> None:
    try:
        Spec.from_stored(value)  # new rows are judged in full by Experiment.clean() and save()
    except SpecError as e:
        raise ValidationError(str(e), code=e.field) from None


# Sent when an experiment's next round becomes ready outside a round task (start, resume).
# orchestrator.fleet.scheduling, which is built on these models, answers it: the models never import it.
round_ready = Signal()  # sender=Experiment; experiment=..., resumed=bool
# Sent when an experiment's state, log or access changes; orchestrator.live.signals publishes them to
# open sockets (orchestrator.live.events), so the models never import what formats their events.
status_changed = Signal()  # sender=Experiment; experiment=...
logged = Signal()  # sender=Experiment; entry=LogEntry
access_changed = Signal()  # sender=Experiment; experiment_ids=[...]


class Experiment(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="experiments")
    team = models.ForeignKey("accounts.Team", models.SET_NULL, null=True, blank=True, related_name="experiments")
    visibility = models.CharField(max_length=8, choices=Visibility.choices, default=Visibility.PRIVATE)
    # Set only while a public link exists; revoking clears it so the old link is dead for good.
    share_token = models.CharField(max_length=64, null=True, blank=True, unique=True, editable=False)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.NATIVE, db_index=True)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    # The sweep it is one run of; deleting the sweep deletes its runs.
    sweep = models.ForeignKey(Sweep, models.CASCADE, null=True, blank=True, related_name="experiments")
    spec = models.JSONField(validators=[validate_spec])
    # The plugin components the spec uses, as created: [{"kind", "name", "plugin", "version", "hash"}].
    # Its rounds run only on workers with that same plugin source (orchestrator.fleet.scheduling).
    plugins = models.JSONField(default=list, blank=True, editable=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT, db_index=True)
    current_round = models.PositiveIntegerField(default=0)  # rounds completed and recorded
    total_rounds = models.PositiveIntegerField(default=0)
    queue = models.CharField(max_length=64, blank=True)
    priority = models.IntegerField(default=0)
    # A background run (the demo) yields to every other run of its queue, whatever the policy: its
    # next round goes only when no other round waits (orchestrator.fleet.policies.order).
    background = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    worker = models.CharField(max_length=255, blank=True)  # hostname that ran (or runs) the last round
    # The round in flight: claimed by ``worker``'s process ``claim_pid`` until ``lease_expires``. The
    # worker's heartbeat renews the lease while that process lives; an expired lease frees the round.
    claimed_round = models.PositiveIntegerField(default=0)
    claim_pid = models.IntegerField(null=True, blank=True)
    lease_expires = models.DateTimeField(null=True, blank=True)
    # The last round sent to the broker, and when: lets the reconciler find rounds that were lost.
    dispatched_round = models.PositiveIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    dispatched_to = models.CharField(max_length=255, blank=True)  # the worker a packed round was sent to
    ready_since = models.DateTimeField(null=True, blank=True)  # when its next round became ready (age boost)
    # Set after a CUDA out-of-memory error halved the spec's client group size; rebuilds keep it.
    client_group_size = models.PositiveIntegerField(null=True, blank=True)
    created = models.DateTimeField(default=timezone.now)
    queued_at = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    def save(self, *args, **kwargs):
        if self.kind == Kind.EXTERNAL:  # its spec is the script's free-form config: nothing runs it here
            self._save_sharing()
            return super().save(*args, **kwargs)
        # The spec is normalised (defaults filled in) so what is stored is exactly what runs. A new
        # one must pass today's bounds and limits; a stored one is not judged again. One already
        # parsed and checked in this process (use_checked_spec) is stored as it is.
        spec = self._carried_spec()
        if spec is None:
            spec = Spec.from_dict(self.spec) if self._state.adding else Spec.from_stored(self.spec)
            if self._state.adding:
                check_new_spec(spec)
            self.spec = spec.to_dict()
        if self._state.adding:
            self.plugins = spec_provenance(spec)  # every way of creating one (form, API, sweep) passes here
        self.total_rounds = spec.rounds
        self._save_sharing()
        super().save(*args, **kwargs)

    def _save_sharing(self) -> None:
        # A public experiment always has a link token, and only a public one has it.
        if self.visibility == Visibility.PUBLIC and not self.share_token:
            self.share_token = secrets.token_urlsafe(32)
        elif self.visibility != Visibility.PUBLIC:
            self.share_token = None

    def clean(self) -> None:
        check_team_visibility(self.visibility, self.team_id)
        if self._state.adding and self.kind == Kind.NATIVE:
            try:
                check_new_spec(Spec.from_dict(self.spec))
            except SpecError as e:
                raise ValidationError({"spec": str(e)}) from None

    # -- domain ------------------------------------------------------------------------------

    def parsed_spec(self) -> Spec:
        """The stored spec as the engine's typed ``Spec``: parsed once per instance (a round task
        asks for it to route the round and to build the simulation) and again only once the spec
        differs from the one it parsed (``refresh_from_db`` reloads an equal dict)."""
        carried = self._carried_spec()
        if carried is not None:
            return carried
        parsed = getattr(self, "_parsed", None)
        if parsed is None or parsed[1] != self.spec:
            parsed = self._parsed = (Spec.from_stored(self.spec), copy.deepcopy(self.spec))
        return parsed[0]

    def use_checked_spec(self, spec: Spec) -> None:
        """Take ``spec``, already parsed and checked (``experiments.launch.checked_spec``): saving and
        starting this instance use it as it is, without parsing or checking it again."""
        self.spec = spec.to_dict()
        self._checked = (spec, self.spec)

    def _carried_spec(self) -> Spec | None:
        # Valid while self.spec is still the very dict it gave (assigning another spec drops it).
        checked = getattr(self, "_checked", None)
        return checked[0] if checked is not None and checked[1] is self.spec else None

    def enable_public_link(self) -> str:
        """Make the experiment public with a new unguessable link token (any older link dies)."""
        self.share_token = secrets.token_urlsafe(32)
        self.visibility = Visibility.PUBLIC
        Experiment.objects.filter(pk=self.pk).update(share_token=self.share_token, visibility=self.visibility)
        self._access_changed()  # sockets opened with the old link close
        return self.share_token

    def revoke_public_link(self) -> None:
        """Kill the public link; the experiment stays visible to its team if it has one."""
        self.share_token = None
        self.visibility = Visibility.TEAM if self.team_id else Visibility.PRIVATE
        Experiment.objects.filter(pk=self.pk).update(share_token=None, visibility=self.visibility)
        self._access_changed()

    def _access_changed(self) -> None:
        access_changed.send(Experiment, experiment_ids=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def is_settled(self) -> bool:
        """Finished, and no live worker is still training one of its rounds (whose event is yet to come)."""
        return self.is_finished and not self.round_in_flight()

    def _transition(self, from_states, **changes) -> bool:
        """Apply ``changes`` only if the row is still in one of ``from_states``; refresh on success."""
        updated = Experiment.objects.filter(pk=self.pk, status__in=list(from_states)).update(**changes)
        if updated:
            self.refresh_from_db()
        return bool(updated)

    def start(self, *, by: str = "", enqueue: bool = True) -> bool:
        """Queue a draft. ``enqueue=False`` is for running it in this process (``--inline``)."""
        if self.kind == Kind.EXTERNAL:  # its rounds are reported, never scheduled
            return False
        queue = pick_queue(self.parsed_spec()) if enqueue else "inline"
        now = timezone.now()
        if not self._transition([Status.DRAFT], status=Status.QUEUED, queue=queue, queued_at=now, ready_since=now):
            return False
        self.log("info", f"Queued on '{queue}'" + (f" by {by}" if by else ""))
        self._status_changed()
        if enqueue:  # round 1 is ready: sent now if the queue has room, else when the policy picks it
            round_ready.send(Experiment, experiment=self, resumed=False)
        return True

    def pause(self, *, by: str = "") -> bool:
        if self.kind == Kind.EXTERNAL:  # its rounds are reported, never scheduled
            return False
        # A round already running finishes and is recorded; the next one is not enqueued.
        if not self._transition(ACTIVE, status=Status.PAUSED):
            return False
        self.log("info", "Paused" + (f" by {by}" if by else "") + "; takes effect at the end of the current round")
        self._status_changed()
        return True

    def resume(self, *, by: str = "") -> bool:
        if self.kind == Kind.EXTERNAL:  # its rounds are reported, never scheduled
            return False
        now = timezone.now()
        if not self._transition([Status.PAUSED], status=Status.QUEUED, queued_at=now, ready_since=now):
            return False
        self.log("info", f"Resumed at round {self.current_round + 1}" + (f" by {by}" if by else ""))
        self._status_changed()
        # A copy sent before the pause may have been lost meanwhile: the round is ready again (a
        # duplicate is harmless), and goes out when the queue's policy picks it.
        round_ready.send(Experiment, experiment=self, resumed=True)
        return True

    def cancel(self, *, by: str = "") -> bool:
        if not self._transition(
            [Status.DRAFT, *ACTIVE, Status.PAUSED], status=Status.CANCELLED, finished=timezone.now()
        ):
            return False
        self.log("info", "Cancelled" + (f" by {by}" if by else ""))
        self._status_changed()
        return True

    # -- used by the round task ----------------------------------------------------------------

    def claim(self, round_number: int, worker: str, pid: int) -> bool:
        """May this worker process run ``round_number`` now?

        Yes only if the run is active, the round is the next one, and no live process holds it
        (never claimed, or its holder's lease ran out). False for duplicate, late or stopped
        deliveries, so two copies of a round never both do the work.
        """
        now = timezone.now()
        free = Q(claimed_round__lt=round_number) | Q(lease_expires__lt=now) | Q(lease_expires__isnull=True)
        return bool(
            Experiment.objects.filter(
                free, pk=self.pk, status__in=ACTIVE, current_round=round_number - 1, total_rounds__gte=round_number
            ).update(
                status=Status.RUNNING,
                worker=worker,
                claimed_round=round_number,
                claim_pid=pid,
                lease_expires=now + timedelta(seconds=settings.WORKER_LOST_AFTER),
                started=Coalesce(F("started"), now),
            )
        )

    def round_in_flight(self) -> bool:
        """Is a live worker process training this experiment's next round right now?"""
        return (
            self.claimed_round > self.current_round
            and self.lease_expires is not None
            and self.lease_expires >= timezone.now()
        )

    def advance(self, round_number: int) -> bool:
        """Record that ``round_number`` is done. Exactly one of two racing deliveries gets True.

        No status filter: a round that finished after a pause or cancel request still counts.
        """
        won = Experiment.objects.filter(pk=self.pk, current_round=round_number - 1).update(
            current_round=round_number, lease_expires=None, ready_since=timezone.now()
        )
        self.refresh_from_db()
        return bool(won)

    def complete(self) -> bool:
        done = self._transition([*ACTIVE, Status.PAUSED], status=Status.COMPLETED, finished=timezone.now())
        if done:
            self.log("info", f"Completed {self.current_round} rounds")
            self._status_changed()
        return done

    def fail(self, message: str) -> bool:
        # The failed round is over: releasing its lease lets the page settle at once.
        failed = self._transition(
            [*ACTIVE, Status.PAUSED], status=Status.FAILED, error=message, finished=timezone.now(), lease_expires=None
        )
        if failed:
            self.log("error", message)
            self._status_changed()
        return failed

    def log(self, level: str, message: str) -> LogEntry:
        entry = LogEntry.objects.create(experiment=self, level=level, message=message)
        logged.send(Experiment, entry=entry)
        return entry

    def _status_changed(self) -> None:
        status_changed.send(Experiment, experiment=self)

    def latest_checkpoint(self, *, at_most: int | None = None) -> Checkpoint | None:
        qs = self.checkpoints.order_by("-round")
        if at_most is not None:
            qs = qs.filter(round__lte=at_most)
        return qs.first()


@receiver(post_delete, sender=Experiment)
def _delete_checkpoint_files(sender, instance: Experiment, **kwargs) -> None:
    # After the commit: a rolled-back delete must not lose the files. Any way of deleting (page,
    # API, admin, a cascade from its owner) comes through here.
    folder = checkpoint_folder(instance.pk)
    transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))
