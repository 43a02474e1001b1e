"""Each team's and user's current share of a queue, as ``fair`` sees it (decayed round seconds), for
the Workers page. Names are shown only to those they concern: a viewer sees their own teams and
themselves by name, everyone else as "another team" or "another user"."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.models import Team
from orchestrator.fleet import candidates


@dataclass(frozen=True)
class Share:
    queue: str
    kind: str  # "team" or "user"
    label: str
    seconds: float  # decayed round seconds (FEDWEB_FAIR_HALF_LIFE)
    fraction: float  # of all the decayed round seconds of its kind on the queue

    @property
    def percent(self) -> str:
        return f"{self.fraction:.0%}"


def current_shares(viewer, queues: list[str]) -> list[Share]:
    """Per queue: every team's, then every user's decayed share, largest first."""
    now = timezone.now()
    own_teams = set(Team.objects.filter(users=viewer).values_list("pk", flat=True))
    rows: list[Share] = []
    for queue in queues:
        for kind in ("team", "user"):
            totals = candidates.service_seconds(queue, now, by=kind)
            whole = sum(totals.values())
            for key, seconds in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])):
                label = _label(kind, int(key.split(":")[1]), viewer, own_teams)
                rows.append(Share(queue, kind, label, seconds, seconds / whole if whole else 0.0))
    return rows


def _label(kind: str, pk: int, viewer, own_teams: set[int]) -> str:
    if kind == "team":
        return Team.objects.get(pk=pk).name if pk in own_teams else "another team"
    if pk == viewer.pk:
        return get_user_model().objects.get(pk=pk).get_username()
    return "another user"


def half_life_hours() -> float:
    return settings.FEDWEB_FAIR_HALF_LIFE / 3600
