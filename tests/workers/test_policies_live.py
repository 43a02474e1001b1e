"""Each scheduling policy's ordering with real Celery workers, real Redis and the real scheduler.

One worker serves the queue (two processes for pack), so the queue's policy alone decides which
experiment's round runs next. Experiments are submitted right after each other: the first one's
round 1 takes the only slot, the others wait ready in the database for the policy to pick them.
Every test also checks that each experiment recorded every round exactly once.
"""

import pytest

from orchestrator.experiments.models import Experiment, Status
from orchestrator.experiments.records import RoundMetric
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.live import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = {**TINY_SPEC, "local": {"epochs": 3}, "evaluation": {"every": 100}}


def _policy(settings, workers, policy: str, concurrency: int = 1, **extra: str) -> None:
    """This process (which schedules on start) and the worker both run ``policy`` on the cpu queue."""
    settings.FEDWEB_POLICY = {"cpu": policy}
    env = {"FEDWEB_POLICY": f"cpu={policy}", **extra}
    for name, value in extra.items():
        setattr(settings, name, int(value))
    workers.start("w1", env=env, concurrency=concurrency)


def _submit(owner, name: str, rounds: int, priority: int = 0, epochs: int = 3) -> Experiment:
    spec = {**SPEC, "rounds": rounds, "local": {"epochs": epochs}}
    e = new_experiment(owner=owner, name=name, spec=spec, priority=priority)
    e.start()
    return e


def _all_finished(experiments, timeout=90) -> None:
    def done():
        return all(Experiment.objects.get(pk=e.pk).is_finished for e in experiments)

    wait_for(done, timeout, "every experiment to finish", interval=0.2)
    for e in experiments:
        e.refresh_from_db()
        assert e.status == Status.COMPLETED, e.error
        assert list(e.rounds.order_by("round").values_list("round", flat=True)) == list(range(1, e.total_rounds + 1))


def _spans(e) -> list[tuple[float, float, float]]:
    """(claimed, recorded, rss_mb) of each recorded round: when a worker held it, from the database."""
    rows = RoundMetric.objects.filter(experiment=e).values_list("claimed", "recorded", "rss_mb")
    return [(start.timestamp(), end.timestamp(), rss) for start, end, rss in rows]


def test_it_keeps_fifo_first_submitted_runs_all_its_rounds_first(user, workers, settings):
    _policy(settings, workers, "fifo")
    first, second = _submit(user, "first", 5), _submit(user, "second", 3)
    _all_finished([first, second])
    assert max(end for _, end, _ in _spans(first)) < min(start for start, _, _ in _spans(second))


def test_it_finishes_a_short_experiment_submitted_after_a_long_one_first_under_srtf(user, workers, settings):
    _policy(settings, workers, "srtf")
    long, short = _submit(user, "long", 12), _submit(user, "short", 3)
    _all_finished([long, short])
    assert short.finished < long.finished
    assert long.rounds.filter(recorded__lt=short.finished).count() == 1  # only the round that was running


def test_it_runs_the_higher_priority_first_under_priority(user, workers, settings):
    _policy(settings, workers, "priority")
    blocker, low, high = _submit(user, "blocker", 3), _submit(user, "low", 3), _submit(user, "high", 3, priority=5)
    _all_finished([blocker, low, high])
    assert high.finished < blocker.finished < low.finished  # then FIFO among equals


def test_it_gives_two_users_equal_worker_time_under_fair(user, other_user, workers, settings):
    _policy(settings, workers, "fair")
    alices = [_submit(user, f"alice-{i}", 6) for i in range(3)]
    bobs = _submit(other_user, "bob", 6)
    _all_finished([*alices, bobs])
    # Until bob's only experiment finished, alice's three got the same worker time as it did, give or
    # take the granularity of the decision: one round (the slowest one recorded).
    alice_seconds = sum(
        seconds
        for e in alices
        for seconds in e.rounds.filter(recorded__lte=bobs.finished).values_list("round_seconds", flat=True)
    )
    bob_seconds = sum(bobs.rounds.values_list("round_seconds", flat=True))
    one_round = max(RoundMetric.objects.values_list("round_seconds", flat=True))
    assert abs(alice_seconds - bob_seconds) <= 1.5 * one_round, (alice_seconds, bob_seconds, one_round)
    assert alices[2].rounds.filter(recorded__lte=bobs.finished).count() < 6  # fifo would have run all of alice's


def _overlaps(a, b) -> list[tuple[float | None, float | None]]:
    """Each time a round of ``a`` and one of ``b`` held worker slots at once (their claimed-to-recorded
    spans, from the database, intersect), the peak memory each experiment had measured by the later
    claim, when the scheduler let the second one in (None: not measured yet, which must never pack)."""
    rows = {
        e.pk: list(RoundMetric.objects.filter(experiment=e).values_list("claimed", "recorded", "rss_mb"))
        for e in (a, b)
    }
    assert all(claimed is not None for r in rows.values() for claimed, _, _ in r), "a round without its claim time"

    def peak_by(pk: int, when) -> float | None:
        return max((rss for _, recorded, rss in rows[pk] if recorded <= when), default=None)

    overlaps = []
    for ca, ra, _ in rows[a.pk]:
        for cb, rb, _ in rows[b.pk]:
            if ca < rb and cb < ra:
                later = max(ca, cb)
                overlaps.append((peak_by(a.pk, later), peak_by(b.pk, later)))
    return overlaps


def test_it_packs_two_small_experiments_on_one_worker_within_the_memory_cap(user, workers, settings):
    cap = 4000  # MB: two rounds of a worker process (a few hundred MB each) fit in it with the 10% margin
    _policy(settings, workers, "pack", concurrency=2, FEDWEB_PACK_CAPACITY_MB=str(cap))
    a, b = _submit(user, "a", 8), _submit(user, "b", 8)
    _all_finished([a, b])
    overlaps = _overlaps(a, b)
    assert overlaps, "the two experiments never held rounds at once"
    assert all(pa is not None and pb is not None and pa + pb <= cap for pa, pb in overlaps), overlaps
    assert a.worker == b.worker  # one worker ran them


def test_it_runs_one_round_at_a_time_when_two_do_not_fit_the_cap(user, workers, settings):
    cap = 500  # MB: one worker process alone is allowed (an idle worker takes any round); two are not
    _policy(settings, workers, "pack", concurrency=2, FEDWEB_PACK_CAPACITY_MB=str(cap))
    a, b = _submit(user, "a", 4), _submit(user, "b", 4)
    _all_finished([a, b])
    overlaps = _overlaps(a, b)
    assert min(RoundMetric.objects.values_list("rss_mb", flat=True)) * 2 > cap * 0.9  # so two would not fit
    assert overlaps == []
