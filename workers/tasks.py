"""Celery tasks. Thin: claim, call the engine, record, enqueue the next round."""

from __future__ import annotations

import logging

from celery import shared_task

log = logging.getLogger(__name__)


@shared_task(acks_late=True, reject_on_worker_lost=True)
def run_round(experiment_id: int, round_number: int) -> None:
    from orchestrator.scheduling import enqueue_next

    experiment = execute_round(experiment_id, round_number, worker=run_round.request.hostname or "worker")
    if experiment is not None:
        enqueue_next(experiment)


def execute_round(experiment_id: int, round_number: int, *, worker: str, report=None):
    """Run one round of an experiment. Returns the experiment if its next round should follow."""
    from orchestrator import events
    from orchestrator.models import ACTIVE, Experiment, RoundMetric, Status, Worker
    from workers import reporting, runtime

    experiment = Experiment.objects.filter(pk=experiment_id).first()
    was_running = experiment is not None and experiment.status == Status.RUNNING
    if experiment is None or not experiment.claim(round_number, worker):
        return None  # deleted, paused, cancelled, or a duplicate/late delivery: nothing to do
    experiment.refresh_from_db()
    report = report or reporting.for_experiment(experiment)
    if not was_running:
        report("info", f"Running round {round_number} on {worker}")
        events.publish_status(experiment)
    Worker.objects.filter(hostname=worker).update(current_experiment=experiment)
    try:
        result, sim = runtime.run_round(experiment, round_number, report)
        metrics = result.to_dict()
        RoundMetric.record(experiment, metrics)
        if runtime.checkpoint_due(round_number, experiment.total_rounds):
            runtime.save_checkpoint(experiment, sim)
    except Exception as e:
        log.exception("round %s of experiment %s failed", round_number, experiment_id)
        runtime.forget(experiment_id)
        experiment.fail(
            str(e) if isinstance(e, runtime.RoundFailed) else f"Round {round_number} failed: {type(e).__name__}: {e}"
        )
        return None
    finally:
        Worker.objects.filter(hostname=worker).update(current_experiment=None)
    if not experiment.advance(round_number):
        return None  # a racing delivery of the same round recorded it first
    events.publish_round(experiment_id, metrics)
    if experiment.current_round >= experiment.total_rounds:
        runtime.forget(experiment_id)
        experiment.complete()
        return None
    if experiment.status not in ACTIVE:
        runtime.forget(experiment_id)  # paused or cancelled at this boundary: free the memory
        events.publish_status(experiment)
        return None
    return experiment


def run_inline(experiment, report=None, on_round=None):
    """Run an experiment's remaining rounds in this process, without Celery or a worker."""
    from orchestrator.models import RoundMetric

    current = experiment
    while current is not None:
        round_number = current.current_round + 1
        current = execute_round(experiment.pk, round_number, worker="inline", report=report)
        if on_round is not None:
            metric = RoundMetric.objects.filter(experiment=experiment, round=round_number).first()
            if metric is not None:
                on_round(metric)
    experiment.refresh_from_db()
    return experiment
