"""A round, run by whichever process took it: claim, call the engine, record, then let the
scheduler send what comes next. The Celery task (``workers.tasks``) calls it; ``run_inline`` runs a
whole experiment in this process. A distributed round (``compute.ranks``) is led from here too: this
process is its rank 0 (``workers.ranks``)."""

from __future__ import annotations

import logging
import os

from django.utils import timezone

from fedweb_engine.components.provenance import label, missing
from fedweb_engine.components.registry import installed_plugins
from orchestrator.experiments.models import ACTIVE, Experiment
from orchestrator.experiments.records import RoundMetric
from orchestrator.fleet.scheduling import release, schedule
from orchestrator.fleet.workers import Worker
from orchestrator.live import events
from orchestrator.storage import disk_use as disk
from orchestrator.sweeps import search
from workers import faults, runtime

log = logging.getLogger(__name__)


def execute_round(experiment_id: int, round_number: int, *, worker: str, log_line=None, dispatch: bool = True):
    """Run one round of an experiment. Returns the experiment if its next round should follow.

    With ``dispatch`` (a worker), the queue is scheduled afterwards whatever happened: this
    worker's slot is free again, and the next round (of this experiment or another, as the
    queue's policy says) goes out. A late copy of a recorded round schedules too, so the chain
    of rounds never breaks when the worker that recorded it died before scheduling.
    """
    try:
        return _execute(experiment_id, round_number, worker, log_line)
    finally:
        if dispatch:
            schedule_queue_of(experiment_id, worker)
            _keep_ranks_if_next(experiment_id, worker)


def _keep_ranks_if_next(experiment_id: int, worker: str) -> None:
    """The ranks held for an experiment stay only while its next round comes back to this worker:
    otherwise (it ended, paused, or the policy sent this worker something else) they go, and a gang's
    members are free for other work."""
    e = Experiment.objects.filter(pk=experiment_id).values(
        "status", "dispatched_round", "current_round", "dispatched_to"
    )
    row = e.first()
    coming = (
        row
        and row["status"] in ACTIVE
        and row["dispatched_round"] > row["current_round"]
        and row["dispatched_to"] == worker
    )
    if not coming:
        runtime.release_ranks(experiment_id)


def schedule_queue_of(experiment_id: int, worker: str) -> None:

    queue = Experiment.objects.filter(pk=experiment_id).values_list("queue", flat=True).first()
    try:
        schedule(queue or "", by=worker)  # this worker is alive: it keeps what it holds (affinity)
    except Exception:  # the database may be away for a moment: the next heartbeat schedules it
        log.warning("could not schedule after round of experiment %s", experiment_id, exc_info=True)


def _execute(experiment_id: int, round_number: int, worker: str, log_line):
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None:
        return None  # deleted
    was_running = experiment.status == "running"
    if _lacks_plugins(experiment, round_number, worker):
        return None
    # Claim before anything slow: a worker that dies holding an unclaimed round leaves nothing to
    # show it had it, so keep that window to milliseconds (the engine and torch are imported at the
    # worker's start, with this module).
    claimed = timezone.now()  # taken before the claim, so the recorded span covers the whole hold
    if not experiment.claim(round_number, worker, os.getpid()):
        _refused(experiment)
        return None
    experiment.refresh_from_db()
    log_line = log_line or experiment.log  # stored, and sent to its open pages
    if not was_running:
        log_line("info", f"Running round {round_number} on {worker}")
        events.publish_status(experiment)
    Worker.objects.filter(hostname=worker).update(current_experiment=experiment)
    try:
        result, sim = runtime.train_round(experiment, round_number, log_line)
        metrics = result.to_dict()
        if sim.spec.privacy.mechanism != "none":
            # why: dp_accounting takes seconds to import; only DP runs need it (the accountant: here, not in the engine)
            from orchestrator.experiments.privacy_budget import spent_epsilon

            eps = spent_epsilon(sim.spec, round_number)
            metrics["dp_epsilon"] = eps if eps is not None and eps < float("inf") else None  # JSON has no ∞
        runtime.publish_state(experiment, sim, log_line)  # before the row: a re-run of this round loads state r-1
        RoundMetric.record(experiment, metrics, claimed=claimed)
        if runtime.checkpoint_due(round_number, experiment.total_rounds):
            runtime.save_checkpoint(experiment, sim)
    except runtime.RoundAborted as e:
        # A rank died or stalled: nothing of the round was recorded; any group (of any size) runs it again.
        log_line("warning", f"{e}; it is sent again")
        experiment.abandon(round_number, worker, os.getpid())
        return None
    except Exception as e:
        log.exception("round %s of experiment %s failed", round_number, experiment_id)
        runtime.forget(experiment_id)
        experiment.fail(
            str(e) if isinstance(e, runtime.RoundFailed) else f"Round {round_number} failed: {type(e).__name__}: {e}"
        )
        return None
    finally:
        Worker.objects.filter(hostname=worker).update(current_experiment=None)
    return finish_round(experiment, round_number, metrics)


def finish_round(experiment, round_number: int, metrics: dict):
    """After a round's metrics row is stored: advance the run, publish the round, then complete,
    stop or go on.

    ``advance`` is the arbiter: of racing deliveries of the same round one gets past it. Returns
    the experiment when its next round should follow, else None.
    """
    if not experiment.advance(round_number):
        return None  # a racing delivery (or conclusion) of the same round recorded it first
    faults.crash_point("after-record", round_number)
    events.publish_round(experiment.pk, {**metrics, "worker": experiment.worker})  # as RoundMetric.record has it
    done = experiment.current_round >= experiment.total_rounds
    if done:
        runtime.forget(experiment.pk)
        if experiment.complete():
            _settle_disk(experiment)
    # A search decides at this boundary: it may hold the run at a rung (paused) for its other seeds.
    held = search.reported(experiment) if experiment.trial_id is not None else False
    if done:
        return None
    if experiment.status not in ACTIVE:
        if not held:  # one held at a rung stays in the bounded cache: it goes on soon, without a reload
            runtime.forget(experiment.pk)  # paused or cancelled at this boundary: free the memory
        events.publish_status(experiment)
        return None
    return experiment


def _settle_disk(experiment) -> None:
    """A completed run keeps its results only (orchestrator.storage.disk_use): nothing runs from it
    again. A failure here (a file held open elsewhere) costs disk, never the run: ``manage.py disk``."""
    try:
        disk.settle(experiment)
    except OSError:
        log.warning("could not trim the files of experiment %s", experiment.pk, exc_info=True)


def _lacks_plugins(experiment, round_number: int, worker: str) -> bool:
    """Refuse, before claiming, a round whose recorded plugins this process lacks (or has with
    other source): it logs why on the experiment, corrects this worker's row (the scheduler chose it
    from a heartbeat that is stale) and makes the round ready again for an eligible worker. Nothing
    is claimed, so the round is neither lost nor run twice."""
    claimable = experiment.status in ACTIVE and experiment.current_round == round_number - 1
    if not claimable or experiment.round_in_flight():
        return False  # a copy the claim refuses anyway
    if not refuse_without_plugins(experiment, worker, f"round {round_number}"):
        return False
    release(experiment, sent_at=experiment.dispatched_at)
    return True


def refuse_without_plugins(experiment, worker: str, work: str) -> bool:
    """Whether this process lacks a plugin the experiment recorded (or has it with other source).
    If so, log it on the experiment, naming ``work`` ("round 3"), and correct
    this worker's row so the scheduler stops choosing it."""
    if not experiment.plugins:
        return False
    mine = installed_plugins()
    lacking = missing(experiment.plugins, mine)
    if not lacking:
        return False
    loaded = {p["name"]: p for p in mine}
    for need in lacking:
        has = loaded.get(need["plugin"])
        other = f"; it has {label(has)} (hash {has['hash']})" if has else ""
        experiment.log(
            "warning",
            f"worker {worker} lacks plugin {label(need)} (hash {need['hash']}){other}: {work} goes to a worker that has it",
        )
    Worker.objects.filter(hostname=worker).update(plugins=mine)
    return True


def _refused(experiment) -> None:
    """A delivery that may not run: stopped, a duplicate of a round in flight, or a late copy."""
    if experiment.status not in ACTIVE:
        events.publish_status(experiment)  # e.g. cancelled while this copy waited: settle the page
    elif experiment.current_round >= experiment.total_rounds:
        experiment.complete()  # the worker that recorded the last round died before completing the run


def run_inline(experiment, log_line=None, on_round=None):
    """Run an experiment's remaining rounds in this process, without Celery or a worker."""
    current = experiment
    while current is not None:
        round_number = current.current_round + 1
        current = execute_round(experiment.pk, round_number, worker="inline", log_line=log_line, dispatch=False)
        if on_round is not None:
            metric = RoundMetric.objects.filter(experiment=experiment, round=round_number).first()
            if metric is not None:
                on_round(metric)
    experiment.refresh_from_db()
    return experiment
