"""A sweep: one submission that expanded into experiments over a grid (or a seeded random sample)
of spec values x a list of seeds. Its experiments point back at it (``Experiment.sweep``) and are
shared, cancelled and deleted with it; who may see or change it is ``access.py``'s, by the same
rules as an experiment (a sweep has an owner, a team and a visibility, never a public link)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

SWEEP_MODES = ("grid", "random")
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
    sample_seed = models.PositiveIntegerField(default=0)
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.name} (sweep #{self.pk})"

    @property
    def config_fields(self) -> list[str]:
        """The swept fields that tell configurations apart (every swept field but the seed)."""
        return [f for f in self.axes if f != SEED_FIELD]

    def cancel(self, *, by: str = "") -> int:
        """Cancel every run of the sweep that is not finished yet; how many were cancelled."""
        return sum(1 for experiment in self.experiments.all() if experiment.cancel(by=by))
