"""Experiments: their states, kinds and visibility, and the ``Experiment`` row with its state machine.

Every transition is one conditional UPDATE (``filter(status__in=...).update(...)``) so that the web
process and any number of workers can race on the same row and exactly one of them wins. Who may
see or change an experiment is ``access.py``'s; what a run leaves behind (RoundMetric, Checkpoint,
LogEntry) is ``records.py``'s; a new experiment is created by ``launch.create_experiment``.
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

from fedweb_engine.components.provenance import spec_provenance
from fedweb_engine.spec.schema import Spec, SpecError
from orchestrator.experiments.records import Checkpoint, LogEntry, checkpoint_folder
from orchestrator.fleet.workers import pick_queue
from orchestrator.runs.edits import RunEdit, check_words
from orchestrator.sweeps.models import Sweep, Trial


class Status(models.TextChoices):
    DRAFT = "draft"
    QUEUED = "queued"
    RUNNING = "running"
    PAUSED = "paused"
    CANCELLED = "cancelled"
    COMPLETED = "completed"
    FAILED = "failed"
    CRASHED = "crashed"  # an external run that sent no report for FEDWEB_EXTERNAL_CRASH_AFTER seconds


ACTIVE = (Status.QUEUED, Status.RUNNING)
FINISHED = (Status.CANCELLED, Status.COMPLETED, Status.FAILED, Status.CRASHED)


class Kind(models.TextChoices):
    NATIVE = "native"  # FedWeb's workers run its rounds
    EXTERNAL = "external"  # its rounds are reported over the API (orchestrator.external)


class Visibility(models.TextChoices):
    PRIVATE = "private"  # the owner (and superusers) only
    TEAM = "team"  # the team's members, by role
    PUBLIC = "public"  # the team's members, and anyone holding the read-only share link


def check_team_visibility(visibility: str, team) -> None:
    """Team visibility needs a team. The one check of it: the model's ``clean()`` (and so the
    sharing form), the new-experiment form and the API all call it; the error names ``visibility``."""
    if visibility == Visibility.TEAM and team is None:
        raise ValidationError({"visibility": "Choose a team to share the experiment with its team"})


def validate_spec(value) -> None:
    """A stored spec must load, as the worker loads it (a model form's ``full_clean``); a new spec is
    checked in full where it is created (``launch.create_experiment``)."""
    try:
        Spec.from_stored(value)
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
    notes = models.TextField(blank=True)  # Markdown, rendered without raw HTML (orchestrator.web.notes)
    # The sweep it is one run of; deleting the sweep deletes its runs.
    sweep = models.ForeignKey(Sweep, models.CASCADE, null=True, blank=True, related_name="experiments")
    # The configuration of a search it is one seed of (orchestrator.sweeps.search).
    trial = models.ForeignKey(Trial, models.SET_NULL, null=True, blank=True, related_name="runs")
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

    @classmethod
    def for_spec(cls, spec: Spec, **fields) -> Experiment:
        """A new, unsaved native experiment of ``spec``, as ``launch.create_experiment`` checked it:
        the spec is stored with its defaults filled in (what is stored is exactly what runs), with
        its number of rounds and the provenance of the plugins it uses (its rounds go only to
        workers with that same plugin source)."""
        experiment = cls(spec=spec.to_dict(), total_rounds=spec.rounds, plugins=spec_provenance(spec), **fields)
        experiment._parsed = (spec, copy.deepcopy(experiment.spec))  # starting it needs no parse again
        return experiment

    def save(self, *args, **kwargs):
        # The spec is stored as it is given: a new one was checked where it was created
        # (launch.create_experiment), a stored one is never judged again.
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

    # -- domain ------------------------------------------------------------------------------

    def parsed_spec(self) -> Spec:
        """The stored spec as the engine's typed ``Spec``: parsed once per instance (a round task
        asks for it to route the round and to build the simulation) and again only once the spec
        differs from the one it parsed (``refresh_from_db`` reloads an equal dict)."""
        parsed = getattr(self, "_parsed", None)
        if parsed is None or parsed[1] != self.spec:
            parsed = self._parsed = (Spec.from_stored(self.spec), copy.deepcopy(self.spec))
        return parsed[0]

    def edit_words(self, user, changes: dict) -> list[str]:
        """Set some of its name, description, tags and notes (``edits.check_words`` first), recording
        each changed one with ``user`` and the time; the fields that changed. The caller checks that
        ``user`` may change the run (``access.can_control``)."""
        changed = {k: v for k, v in check_words(changes).items() if getattr(self, k) != v}
        if not changed:
            return []
        with transaction.atomic():
            Experiment.objects.filter(pk=self.pk).update(**changed)
            RunEdit.objects.bulk_create(
                RunEdit(experiment=self, user=user, username=user.get_username(), field=k, old=getattr(self, k), new=v)
                for k, v in changed.items()
            )
        for field, value in changed.items():
            setattr(self, field, value)
        return list(changed)

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

    def resume(self, *, by: str = "", keep_place: bool = False) -> bool:
        """Queue a paused run again: at the back of its queue, or, with ``keep_place`` (a search that
        held it at a rung: no one's decision to leave), where it was before."""
        if self.kind == Kind.EXTERNAL:  # its rounds are reported, never scheduled
            return False
        now = timezone.now()
        place = {} if keep_place else {"queued_at": now}
        if not self._transition([Status.PAUSED], status=Status.QUEUED, ready_since=now, **place):
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

    def abandon(self, round_number: int, worker: str, pid: int) -> bool:
        """Give back a claimed round that was not completed (a rank of its distributed group failed):
        its lease ends and it is ready to be sent again at once, to the same worker first (affinity).
        Only the holder can: a late caller whose claim was taken over changes nothing."""
        return bool(
            Experiment.objects.filter(
                pk=self.pk, claimed_round=round_number, current_round=round_number - 1, worker=worker, claim_pid=pid
            ).update(
                claimed_round=round_number - 1, lease_expires=None, dispatched_round=round_number - 1,
                dispatched_to="", ready_since=timezone.now(),
            )
        )  # fmt: skip

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
