"""What a user keeps of the runs table: the columns they last chose (``TablePrefs``), and named views
(``SavedView``: a query, a column set, a grouping, a sort and a target accuracy), their own or shared
with a team they belong to. A view holds no runs: whoever opens it sees the runs *they* may read."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q, QuerySet
from django.utils import timezone

DEFAULT_TARGET = 0.8


class TablePrefs(models.Model):
    """The runs table as a user last set it up: its columns and the target accuracy."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, models.CASCADE, primary_key=True, related_name="+")
    columns = models.JSONField(default=list, blank=True)
    target = models.FloatField(default=DEFAULT_TARGET)


class SavedView(models.Model):
    """A named table: query, columns, grouping, sort and target; shared with ``team`` when set."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, models.CASCADE, related_name="saved_views")
    # Shared with the team's members (every role reads it); only the owner changes or deletes it. A
    # deleted team leaves the view to its owner alone.
    team = models.ForeignKey("accounts.Team", models.SET_NULL, null=True, blank=True, related_name="saved_views")
    name = models.CharField(max_length=100)
    query = models.TextField(blank=True)
    columns = models.JSONField(default=list, blank=True)
    group = models.JSONField(default=list, blank=True)
    sort = models.CharField(max_length=300, blank=True)
    target = models.FloatField(default=DEFAULT_TARGET)
    created = models.DateTimeField(default=timezone.now)
    updated = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="one_view_name_per_owner")]

    def __str__(self) -> str:
        return self.name

    def params(self) -> dict[str, str]:
        """The view as the runs table's URL parameters."""
        return {
            "q": self.query,
            "columns": ",".join(self.columns),
            "group": ",".join(self.group),
            "sort": self.sort,
            "target": f"{self.target:g}",
            "view": str(self.pk),
        }


def views_for(user) -> QuerySet[SavedView]:
    """The views ``user`` may open: their own, and those shared with a team they belong to."""
    if not (user and user.is_authenticated):
        return SavedView.objects.none()
    mine_or_shared = Q(owner=user) | Q(team__memberships__user=user)
    return SavedView.objects.filter(mine_or_shared).select_related("owner", "team").distinct()
