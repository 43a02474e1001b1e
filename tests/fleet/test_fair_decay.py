"""Fair share that forgets (issue 17): a round's seconds count half after FEDWEB_FAIR_HALF_LIFE, a
quarter after two; fair orders by the decayed totals; the Workers page shows each team's and user's
current share. Every figure here is computed by hand."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import Membership, Team
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.candidates import service_seconds
from orchestrator.fleet.policies import decayed
from orchestrator.fleet.scheduling import schedule
from orchestrator.fleet.workers import Worker
from tests.fleet.test_schedule import _measured, _new, _run

HOUR = 3600.0


def test_it_halves_service_every_half_life():
    assert decayed(100.0, 0.0, HOUR) == 100.0
    assert decayed(100.0, HOUR, HOUR) == 50.0
    assert decayed(100.0, 2 * HOUR, HOUR) == 25.0
    assert decayed(100.0, -5.0, HOUR) == 100.0  # a clock a little ahead never counts more


def test_it_refuses_a_half_life_that_is_not_positive():
    with pytest.raises(ValueError, match="half_life_seconds"):
        decayed(1.0, 1.0, 0.0)


def _round_ago(e, n: int, seconds: float, ago: timedelta) -> None:
    _measured(e, n, seconds, 300.0)
    RoundMetric.objects.filter(experiment=e, round=n).update(recorded=timezone.now() - ago)


@pytest.mark.django_db
def test_it_sums_each_keys_rounds_decayed_by_their_age(user, other_user, settings):
    settings.FEDWEB_FAIR_HALF_LIFE = 3600
    team = Team.objects.create(name="vision")
    mine, theirs = _new(user, "mine", start=False), _new(other_user, "theirs", team=team, start=False)
    for e in (mine, theirs):
        e.queue = "cpu"
        e.save(update_fields=["queue"])
    _round_ago(mine, 1, 100.0, timedelta(0))
    _round_ago(mine, 2, 60.0, timedelta(hours=1))  # counts 30
    _round_ago(theirs, 1, 80.0, timedelta(hours=2))  # counts 20
    got = service_seconds("cpu")
    assert got[f"user:{user.pk}"] == pytest.approx(130.0, rel=1e-3)
    assert got[f"team:{team.pk}"] == pytest.approx(20.0, rel=1e-3)
    assert service_seconds("cpu", by="user")[f"user:{other_user.pk}"] == pytest.approx(20.0, rel=1e-3)
    _round_ago(mine, 3, 1e6, timedelta(hours=21))  # 20+ half-lives old: forgotten
    assert service_seconds("cpu")[f"user:{user.pk}"] == pytest.approx(130.0, rel=1e-3)


@pytest.mark.django_db
def test_fair_no_longer_holds_back_a_team_that_used_the_fleet_long_ago(
    user, other_user, django_user_model, enqueued, settings
):
    settings.FEDWEB_POLICY = {"cpu": "fair"}
    settings.FEDWEB_FAIR_HALF_LIFE = 3600
    Worker.objects.create(hostname="w1@h", queue="cpu", slots=1)
    blocker = _new(django_user_model.objects.create_user("carol"), "blocker")  # takes the only slot
    old, recent = _new(user, "old", start=False), _new(other_user, "recent", start=False)
    for e in (old, recent):
        e.queue = "cpu"
        e.save(update_fields=["queue"])
    _round_ago(old, 1, 1000.0, timedelta(hours=4))  # 1000 s, 4 half-lives ago: counts 62.5
    _round_ago(recent, 1, 100.0, timedelta(0))  # counts 100
    recent.start()  # submitted first: fifo would send it first
    old.start()
    _run(blocker, seconds=5000.0)  # the slot is free again; carol has used 5000 s just now
    assert schedule("cpu") == [(old.pk, 1)]  # 62.5 < 100 < 5000


@pytest.mark.django_db
def test_the_workers_page_shows_each_teams_and_users_current_share(client, user, other_user, settings):
    settings.FEDWEB_FAIR_HALF_LIFE = 3600
    team = Team.objects.create(name="vision")
    Membership.objects.create(team=team, user=user, role="owner")
    ours, theirs = _new(user, "ours", team=team, start=False), _new(other_user, "theirs", start=False)
    for e in (ours, theirs):
        e.queue = "cpu"
        e.save(update_fields=["queue"])
    _round_ago(ours, 1, 30.0, timedelta(0))
    _round_ago(theirs, 1, 20.0, timedelta(hours=1))  # counts 10
    client.force_login(user)
    page = client.get("/workers/").content.decode()
    assert 'team: vision</td><td class="num">30.0</td><td class="num">100%' in page
    assert 'user: alice</td><td class="num">30.0</td><td class="num">75%' in page
    assert 'user: another user</td><td class="num">10.0</td><td class="num">25%' in page
    assert "bob" not in page.split('id="shares"')[1].split("</table>")[0]  # others stay anonymous
