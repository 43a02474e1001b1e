"""Affinity with real Celery workers (issue 17): with two live workers, an experiment's rounds after the
first stay on the worker that ran the first (it holds the experiment: no rebuild, no replay); when that
worker is killed, the other continues, every round is still recorded exactly once and the final
checkpoint (with SCAFFOLD: every client's control variates too) equals the run alone."""

import pytest

from orchestrator.experiments.models import Experiment, Status
from tests.conftest import TINY_SPEC
from tests.factories import new_experiment
from tests.live import wait_for
from tests.workers.reference import assert_final_checkpoint_equals, compared, recorded_rounds, reference_simulation

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SPEC = {**TINY_SPEC, "local": {"epochs": 3}, "evaluation": {"every": 100}}


def _switches(e: Experiment) -> list[str]:
    """Log lines of a worker that did not hold the experiment at the round it had to run."""
    rows = e.log_entries.filter(message__regex=r"Rebuilt|replaying|loaded the state").values_list("message", flat=True)
    return list(rows)


def _finished(e: Experiment, timeout: float = 120) -> None:
    def done():
        e.refresh_from_db()
        return e.is_finished and e.status

    wait_for(done, timeout, f"experiment {e.pk} to finish (at round {e.current_round}, status {e.status})")
    assert e.status == Status.COMPLETED, e.error
    assert list(e.rounds.order_by("round").values_list("round", flat=True)) == list(range(1, e.total_rounds + 1))


def test_it_keeps_every_round_after_the_first_on_one_of_two_workers(user, workers):
    workers.start_all("w1", "w2")
    e = new_experiment(owner=user, name="affine", spec={**SPEC, "rounds": 12})
    e.start()
    claimants = set()

    def finished():
        e.refresh_from_db()
        if e.current_round >= 1 and e.worker:
            claimants.add(e.worker)
        return e.is_finished

    wait_for(finished, 120, "the experiment to finish", interval=0.05)
    assert e.status == Status.COMPLETED, e.error
    assert list(e.rounds.order_by("round").values_list("round", flat=True)) == list(range(1, 13))
    # Nothing is ever replayed or reloaded: whoever took round 1 keeps the run. A heartbeat's pass that
    # races the holder's own right after a record leaves the round to the holder (FEDWEB_AFFINITY_GRACE),
    # so no round moves (before the grace, one race in about twelve rounds moved it and loaded the state).
    switches = _switches(e)
    assert switches == [], switches
    workers = list(e.rounds.order_by("round").values_list("worker", flat=True))
    assert len(set(workers)) == 1, f"rounds ran on {workers} (claimants {claimants})"


# SCAFFOLD keeps a control variate per client in files every worker shares (issue 19): its
# holder killed twice, it moves on to a third worker and still ends exactly where it would
# alone, every client's rows included.
SCAFFOLD = {**SPEC, "algorithm": {"client": {"name": "scaffold"}}}


@pytest.mark.parametrize("spec,kills", [(SPEC, 1), (SCAFFOLD, 2)], ids=["fedavg", "scaffold"])
def test_the_other_worker_continues_when_the_holder_is_killed(user, workers, tmp_path, spec, kills):
    procs = workers.start_all(*(f"w{i}" for i in range(1, kills + 2)))  # one more than the kills
    e = new_experiment(owner=user, name="holder killed", spec={**spec, "rounds": 12})
    e.start()
    killed: list[tuple[str, int]] = []
    for k in range(kills):
        beyond = killed[-1][1] + 2 if killed else 3  # the next holder has run a round or two

        def rounds_done(beyond=beyond):
            e.refresh_from_db()
            return (e.current_round >= beyond or e.is_finished) and e.worker

        holder = wait_for(rounds_done, 120, f"{beyond} rounds to be recorded").split("@")[0]
        assert not e.is_finished, f"the run ended before kill {k + 1} of {kills} (killed {killed})"
        procs[holder].kill9()  # in a round or between two: either way its state must survive
        killed.append((holder, e.current_round))
    _finished(e)
    assert not any(e.worker.startswith(h + "@") for h, _ in killed), f"{e.worker} ran the last round ({killed})"
    reference, results = reference_simulation(e.spec)
    try:
        assert recorded_rounds(e) == compared(results)
        assert_final_checkpoint_equals(e, reference, tmp_path / "from-checkpoint")
    finally:
        reference.close()
