"""A sweep: one submission that expanded into experiments over a grid (or a seeded random sample)
of spec values x a list of seeds, or a search (``orchestrator.sweeps.search``) that stops losing
configurations early or samples them with TPE. Its experiments point back at it
(``Experiment.sweep``) and are shared, cancelled and deleted with it; who may see or change it is
``access.py``'s, by the same rules as an experiment (a sweep has an owner, a team and a
visibility, never a public link)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

SWEEP_MODES = ("grid", "random", "tpe")
STOPPING = ("none", "asha", "median")
SEED_FIELD = "seed"


class Sweep(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="sweeps")
    team = models.ForeignKey("accounts.Team", models.SET_NULL, null=True, blank=True, related_name="sweeps")
    visibility = models.CharField(max_length=8, default="private")  # private or team (Visibility)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    base_spec = models.JSONField()  # what every run shares, before the swept values are set
    # {"algorithm.mu": [0, 0.01], "seed": [0, 1, 2]}: the swept fields in the order given.
    axes = models.JSONField()
    mode = models.CharField(max_length=8, choices=[(m, m) for m in SWEEP_MODES], default="grid")
    samples = models.PositiveIntegerField(null=True, blank=True)  # random mode: configurations drawn
    sample_seed = models.PositiveIntegerField(default=0)  # random's draw, and TPE's sampler seed
    stopping = models.CharField(max_length=8, choices=[(s, s) for s in STOPPING], default="none")
    # The search's settings (``search_options.SearchOptions.to_dict()``): rungs, target, TPE ranges...
    search = models.JSONField(default=dict, blank=True)
    # At most this many rounds of the sweep sent or running at once (a worker each); None: no cap.
    max_workers = models.PositiveIntegerField(null=True, blank=True)
    # Bumped by every send under the cap: a compare-and-swap, so two schedulers never both use its last slot.
    sends = models.PositiveIntegerField(default=0)
    cancelled = models.BooleanField(default=False)  # the search makes no new trial or promotion after a cancel
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} (sweep #{self.pk})"

    @property
    def config_fields(self) -> list[str]:
        """The fields that tell configurations apart: every swept field but the seed, and TPE's ranges."""
        return [f for f in self.axes if f != SEED_FIELD] + list(self.search.get("ranges", {}))

    @property
    def is_search(self) -> bool:
        """Does a search decide over its configurations (early stopping or TPE), with a ``Trial`` each?"""
        return self.stopping != "none" or self.mode == "tpe"

    def cancel(self, *, by: str = "") -> int:
        """Cancel every run of the sweep that is not finished yet (and its search: no new trial, no
        promotion); how many were cancelled."""
        Sweep.objects.filter(pk=self.pk).update(cancelled=True)
        self.cancelled = True
        return sum(1 for experiment in self.experiments.all() if experiment.cancel(by=by))


class TrialState(models.TextChoices):
    RUNNING = "running"  # its runs train, or wait at a rung for the other seeds
    STOPPED = "stopped"  # the search paused its runs at a rung; a promotion resumes them
    COMPLETED = "completed"  # every run that did not fail ran its full length
    FAILED = "failed"  # every run failed or was cancelled
    MANUAL = "manual"  # stopped, then resumed by hand: runs to its full length outside the search


class Trial(models.Model):
    """One configuration of a search: its values at the decision rounds (mean over its seeds of the
    last k evaluated rounds), as each decision used them. Its runs (``Experiment.trial``) are one per
    seed. The rows are the search's memory: Optuna's view is rebuilt from them at each decision."""

    sweep = models.ForeignKey(Sweep, models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()  # creation order from 0: Optuna's trial number
    params = models.JSONField()  # {field: value}, the fields of ``Sweep.config_fields``
    state = models.CharField(max_length=12, choices=TrialState.choices, default=TrialState.RUNNING)
    values = models.JSONField(default=dict, blank=True)  # {"<round>": value} at each decision round reached
    value = models.FloatField(null=True, blank=True)  # at the full length, once completed
    rung = models.PositiveIntegerField(null=True, blank=True)  # the round of its stop (or last promotion)
    rank = models.PositiveIntegerField(null=True, blank=True)  # its rank there ...
    ranked = models.PositiveIntegerField(null=True, blank=True)  # ... of this many configurations
    error = models.TextField(blank=True)  # a sampled configuration no spec accepts

    class Meta:
        ordering = ["sweep", "number"]
        constraints = [models.UniqueConstraint(fields=["sweep", "number"], name="one_trial_number_per_sweep")]

    def __str__(self) -> str:
        return f"trial {self.number} of sweep #{self.sweep_id}"

    def value_at(self, step: int) -> float | None:
        return self.values.get(str(step))
