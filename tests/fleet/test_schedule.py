"""schedule(queue): which ready round is sent next, from database state, with the in-memory recorder.

Each test has one live worker (a Worker row with a fresh heartbeat) unless it says otherwise, so the
queue has room for exactly its slots; a round "runs" by being claimed and recorded by hand.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from orchestrator.fleet import gangs
from orchestrator.fleet.scheduling import reconcile, schedule
from orchestrator.models import Experiment, Gang, RoundMetric, Worker
from tests.conftest import TINY_SPEC

pytestmark = pytest.mark.django_db


def _new(owner, name, *, rounds=5, priority=0, team=None, start=True) -> Experiment:
    e = Experiment.objects.create(owner=owner, name=name, spec={**TINY_SPEC, "rounds": rounds}, priority=priority)
    if team is not None:
        Experiment.objects.filter(pk=e.pk).update(team=team)
    if start:
        e.start()
    return e


def _sent(enqueued) -> list[tuple[int, int]]:
    return [tuple(args) for args, _ in enqueued]


def _run(e: Experiment, *, seconds: float = 1.0, rss_mb: float = 300.0) -> None:
    """Claim and record e's next round as a worker would, measured at ``seconds`` and ``rss_mb``."""
    e.refresh_from_db()
    n = e.current_round + 1
    assert e.claim(n, "w1@h", 1), f"round {n} of {e.name} could not be claimed"
    _measured(e, n, seconds, rss_mb)
    assert e.advance(n)


def _measured(e: Experiment, n: int, seconds: float, rss_mb: float) -> None:
    RoundMetric.objects.create(
        experiment=e, round=n, participants=4, completed=4, stragglers=0, dropped=0, bytes_down=0, bytes_up=0,
        bytes_formula=0, round_seconds=seconds, train_seconds=seconds, samples=1, rss_mb=rss_mb, threads=1,
        device="cpu",
    )  # fmt: skip


@pytest.fixture
def worker():
    return Worker.objects.create(hostname="w1@h", queue="cpu", slots=1)


def test_it_sends_no_more_rounds_than_the_live_workers_have_slots(user, worker, enqueued):
    a, b = _new(user, "a"), _new(user, "b")
    assert _sent(enqueued) == [(a.pk, 1)]  # b's first round is ready, not sent: the one slot is taken
    b.refresh_from_db()
    assert b.dispatched_round == 0 and b.ready_since is not None
    Worker.objects.create(hostname="w2@h", queue="cpu", slots=1)
    assert schedule("cpu") == [(b.pk, 1)]  # a worker came: its heartbeat schedules the queue
    assert schedule("cpu") == []


def test_a_gang_s_members_take_their_slots_until_it_is_dissolved(user, enqueued):
    for name in ("w1@h", "w2@h", "w3@h"):
        Worker.objects.create(hostname=name, queue="cpu", slots=1)
    ranked = Experiment.objects.create(
        owner=user, name="ranked", spec={**TINY_SPEC, "compute": {"device": "cpu", "ranks": 2}}
    )
    ranked.start()
    assert ranked.claim(1, "w1@h", 1)  # its leader, rank 0
    assert gangs.recruit(ranked, "w1@h", 1) == ["w2@h"]  # an idle worker of the queue, never the leader
    gang = gangs.form(ranked, "w1@h", ["w2@h"], "127.0.0.1:1")
    ranks = [(args, kw["queue"].name) for args, kw in enqueued if len(args) == 5]
    assert ranks == [((ranked.pk, gang.pk, 1, 2, "127.0.0.1:1"), "w2@h.dq2")]  # its rank, by its own queue
    other, another = _new(user, "other"), _new(user, "another")
    assert (other.pk, 1) in _sent(enqueued) and (another.pk, 1) not in _sent(enqueued)  # 3 slots: leader, member
    assert gangs.recruit(another, "w3@h", 1) == []  # none idle: w1 leads, w2 serves, other's round was sent
    gangs.dissolve(gang.pk)
    assert not Gang.objects.exists() and Worker.objects.get(hostname="w2@h").current_experiment is None
    assert schedule("cpu") == [(another.pk, 1)]


def test_a_gang_whose_leader_stopped_answering_is_removed_by_the_reconciler(user, enqueued):
    Worker.objects.create(hostname="w1@h", queue="cpu", last_heartbeat=timezone.now() - timedelta(hours=1))
    Worker.objects.create(hostname="w2@h", queue="cpu")
    ranked = Experiment.objects.create(owner=user, name="ranked", spec=TINY_SPEC)
    ranked.start()
    gang = gangs.form(ranked, "w1@h", gangs.recruit(ranked, "w1@h", 1), "127.0.0.1:1")
    assert gang.members == ["w2@h"] and Worker.objects.get(hostname="w2@h").current_experiment == ranked
    reconcile()
    assert not Gang.objects.exists()
    assert Worker.objects.get(hostname="w2@h").current_experiment is None  # its slot is free: nothing reserved


def test_it_keeps_fifo_first_submitted_first(user, worker, enqueued):
    a, b = _new(user, "a", rounds=2), _new(user, "b", rounds=2)
    _run(a)
    assert schedule("cpu") == [(a.pk, 2)]
    _run(a)  # a completes (its last round): b goes next
    assert schedule("cpu") == [(b.pk, 1)]


def test_it_sends_the_higher_priority_first_under_priority(user, worker, enqueued, settings):
    settings.FEDWEB_POLICY = {"cpu": "priority"}
    blocker = _new(user, "blocker")
    low, high = _new(user, "low"), _new(user, "high", priority=5)
    _run(blocker)
    assert schedule("cpu") == [(high.pk, 1)]
    assert low.pk not in [pk for pk, _ in _sent(enqueued)]


def test_it_sends_the_shortest_remaining_first_under_srtf(user, worker, enqueued, settings):
    settings.FEDWEB_POLICY = {"cpu": "srtf"}
    long = _new(user, "long", rounds=20)
    short = _new(user, "short", rounds=3)  # new: estimated with the probe (the shortest measured round)
    _run(long, seconds=2.0)
    assert schedule("cpu") == [(short.pk, 1)]  # 3 x 2 s left beats 19 x 2 s
    _run(short, seconds=30.0)  # measured: 2 x 30 s left is now longer than 19 x 2 s
    assert schedule("cpu") == [(long.pk, 2)]


def test_it_equalises_round_seconds_per_user_or_team_under_fair(user, other_user, worker, enqueued, settings):
    from accounts.models import Team

    settings.FEDWEB_POLICY = {"cpu": "fair"}
    team = Team.objects.create(name="vision")
    mine = [_new(user, f"mine-{i}") for i in range(3)]
    theirs = _new(other_user, "theirs", team=team)
    _run(mine[0], seconds=5.0)
    assert schedule("cpu") == [(theirs.pk, 1)]  # team:vision has had 0 s, user:alice 5 s
    _run(theirs, seconds=20.0)
    assert schedule("cpu") == [(mine[0].pk, 2)]  # alice 5 s < vision 20 s; fifo among hers


def test_it_sends_a_round_ready_longer_than_the_age_boost_first(user, worker, enqueued, settings):
    settings.FEDWEB_POLICY = {"cpu": "priority"}
    settings.FEDWEB_AGE_BOOST_SECONDS = 60
    blocker = _new(user, "blocker", priority=9)
    starving = _new(user, "starving")
    _run(blocker)
    assert schedule("cpu") == [(blocker.pk, 2)]  # priority wins while starving has waited < 60 s
    _run(blocker)
    Experiment.objects.filter(pk=starving.pk).update(ready_since=timezone.now() - timedelta(seconds=61))
    assert schedule("cpu") == [(starving.pk, 1)]


def test_it_lets_the_broker_hold_rounds_while_no_live_worker_serves_the_queue(user, enqueued):
    a, b = _new(user, "a"), _new(user, "b")
    assert _sent(enqueued) == [(a.pk, 1), (b.pk, 1)]  # sent at once, as before policies


def test_it_holds_pack_rounds_in_the_database_while_no_live_worker_serves_the_queue(user, enqueued, settings):
    settings.FEDWEB_POLICY = {"cpu": "pack"}
    _new(user, "a")
    assert _sent(enqueued) == []  # a packed round goes to a chosen worker; there is none yet
    Worker.objects.create(hostname="w1@h", queue="cpu", slots=2)
    assert len(reconcile()) == 1  # the new worker's heartbeat sends it


def _pack_world(user, settings, capacity_mb: int):
    settings.FEDWEB_POLICY = {"cpu": "pack"}
    settings.FEDWEB_PACK_CAPACITY_MB = capacity_mb
    Worker.objects.create(hostname="w1@h", queue="cpu", slots=2)
    a, b = _new(user, "a", start=False), _new(user, "b", start=False)
    for e in (a, b):  # both measured: one round each at 300 MB
        Experiment.objects.filter(pk=e.pk).update(status="queued", queue="cpu", current_round=1)
        _measured(e, 1, 1.0, 300.0)
    return a, b


def test_it_packs_two_measured_rounds_on_one_worker_when_they_fit(user, enqueued, settings):
    a, b = _pack_world(user, settings, capacity_mb=1000)  # 600 MB <= 1000 x 0.9
    assert schedule("cpu") == [(a.pk, 2), (b.pk, 2)]
    assert [kw["queue"].name for _, kw in enqueued] == ["w1@h.dq2", "w1@h.dq2"]  # its own queue
    assert Experiment.objects.get(pk=b.pk).dispatched_to == "w1@h"


def test_it_runs_one_round_at_a_time_when_the_peaks_do_not_fit(user, enqueued, settings):
    a, b = _pack_world(user, settings, capacity_mb=600)  # 600 MB > 600 x 0.9
    assert schedule("cpu") == [(a.pk, 2)]
    _run(a)
    assert schedule("cpu") == [(a.pk, 3)]  # fifo order once a's round is done


def test_it_never_packs_beside_a_round_of_unknown_memory(user, enqueued, settings):
    a, b = _pack_world(user, settings, capacity_mb=100_000)
    RoundMetric.objects.filter(experiment=a).delete()  # a has no measured round: its next is the probe
    assert schedule("cpu") == [(a.pk, 2)]


def test_it_packs_nothing_on_a_worker_another_scheduler_just_sent_to(user, enqueued, settings):
    from orchestrator.fleet import candidates

    a, b = _pack_world(user, settings, capacity_mb=1000)
    stale = candidates.live_rooms("cpu", timezone.now())[0]
    Worker.objects.filter(hostname="w1@h").update(sends=stale.sends + 1)  # someone else sent it a round
    assert not candidates.reserve(stale) and not candidates.reserve(stale)
    assert schedule("cpu") == [(a.pk, 2), (b.pk, 2)]  # read afresh, it may


def test_it_packs_nothing_more_when_another_scheduler_sent_a_round_after_the_rooms_were_read(
    user, enqueued, settings, monkeypatch
):
    from orchestrator.fleet import scheduling

    a, b = _pack_world(user, settings, capacity_mb=100_000)
    RoundMetric.objects.filter(experiment__in=[a, b]).delete()  # both unknown: each must run alone
    real = scheduling.dispatch_round

    def raced(e, round_number, **kw):
        if e.pk == a.pk:  # another scheduler sent a's round between our read and our send
            real(e, round_number, **kw)
            return False
        return real(e, round_number, **kw)

    monkeypatch.setattr(scheduling, "dispatch_round", raced)
    assert schedule("cpu") == []  # b is not sent beside a round it knows nothing of
    assert Experiment.objects.get(pk=b.pk).dispatched_round < 2


def test_it_makes_the_round_of_a_dead_packed_worker_ready_again(user, enqueued, settings):
    a, _ = _pack_world(user, settings, capacity_mb=1000)
    schedule("cpu")
    Worker.objects.filter(hostname="w1@h").update(last_heartbeat=timezone.now() - timedelta(hours=1))
    Worker.objects.create(hostname="w2@h", queue="cpu", slots=2)
    sent = reconcile()
    assert (a.pk, 2) in sent and enqueued[-1][1]["queue"].name in ("w2@h.dq2",)
    assert a.log_entries.filter(message="Round 2 was sent to w1@h, which stopped answering; sent it again").exists()
