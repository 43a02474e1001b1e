"""What the domain announces, published to open sockets (``orchestrator.live.events``).

The experiment's own signals (``orchestrator.experiments.models``: status changed, a log line, access changed)
become socket events here, so the models never import the live layer. And open sockets check
access again whenever it may have shrunk.

Signals rather than calls in each view, so the admin, the API, the shell and cascades (a deleted
team takes its memberships with it) are covered too. Changes made with ``QuerySet.update`` send no
signal: the model methods that do so (``Experiment.revoke_public_link``...) publish themselves.
"""

from __future__ import annotations

from django.conf import settings
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from accounts.models import Membership
from orchestrator.experiments.models import FINISHED, Experiment, access_changed, logged, status_changed
from orchestrator.live import events


@receiver(status_changed, dispatch_uid="fedweb-live-status")
def _status_changed(sender, experiment: Experiment, **kwargs) -> None:
    events.publish_status(experiment)


@receiver(logged, dispatch_uid="fedweb-live-log")
def _logged(sender, entry, **kwargs) -> None:
    events.publish_log(entry)


@receiver(access_changed, dispatch_uid="fedweb-live-access")
def _access_changed(sender, experiment_ids, **kwargs) -> None:
    events.publish_access_changed(experiment_ids=experiment_ids)


@receiver(post_save, sender=Experiment, dispatch_uid="fedweb-access-experiment-saved")
def _experiment_saved(sender, instance: Experiment, created: bool, **kwargs) -> None:
    if not created:  # team or visibility may have changed (sharing page, API, admin)
        events.publish_access_changed(experiment_ids=[instance.pk])


@receiver(post_delete, sender=Experiment, dispatch_uid="fedweb-access-experiment-deleted")
def _experiment_deleted(sender, instance: Experiment, **kwargs) -> None:
    events.publish_access_changed(experiment_ids=[instance.pk])


def _unfinished_team_experiments(team_id: int) -> list[int]:
    """The team's experiments whose rounds may still flow. Their sockets get the access event in
    their experiment's group too, in order with its rounds (``orchestrator.sockets.fanout``): the
    user's own group is another channel, and a round published right after the change could
    overtake it."""
    return list(Experiment.objects.filter(team_id=team_id).exclude(status__in=FINISHED).values_list("pk", flat=True))


@receiver(post_save, sender=Membership, dispatch_uid="fedweb-access-membership-saved")
def _membership_saved(sender, instance: Membership, created: bool, **kwargs) -> None:
    if not created:  # a role changed
        events.publish_access_changed(
            experiment_ids=_unfinished_team_experiments(instance.team_id), user_ids=[instance.user_id]
        )


@receiver(post_delete, sender=Membership, dispatch_uid="fedweb-access-membership-deleted")
def _membership_deleted(sender, instance: Membership, **kwargs) -> None:
    events.publish_access_changed(
        experiment_ids=_unfinished_team_experiments(instance.team_id), user_ids=[instance.user_id]
    )


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="fedweb-access-user-saved")
def _user_saved(sender, instance, created: bool, update_fields=None, **kwargs) -> None:
    # Deactivated or no longer a superuser; a login (which only stamps last_login) changes nothing.
    if not created and set(update_fields or ()) != {"last_login"}:
        events.publish_access_changed(user_ids=[instance.pk])
