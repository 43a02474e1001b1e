"""Celery tasks. Thin: the worker's entry points, named for ``send_task`` (``orchestrator.fleet``
sends them by name); a round's work is ``workers.rounds``, a recruited rank's ``workers.ranks``."""

from __future__ import annotations

from celery import shared_task

from workers.ranks import serve_rank as serve_as_rank
from workers.rounds import execute_round, schedule_queue_of


@shared_task(name="workers.tasks.run_round", acks_late=True, reject_on_worker_lost=True)
def run_round(experiment_id: int, round_number: int) -> None:
    execute_round(experiment_id, round_number, worker=run_round.request.hostname or "worker")


@shared_task(name="workers.tasks.serve_rank")
def serve_rank(experiment_id: int, gang_id: int, rank: int, size: int, address: str) -> None:
    # Not acked late: a member that dies mid-round is replaced by a new group, never by a redelivery.
    worker = serve_rank.request.hostname or "worker"
    try:
        serve_as_rank(experiment_id, gang_id, rank, size, address, worker=worker)
    finally:
        schedule_queue_of(experiment_id, worker)  # this slot is free again
