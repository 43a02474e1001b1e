"""Celery tasks. Thin: the worker's entry points, named for ``send_task`` (``orchestrator.fleet``
sends them by name); a round's work is ``workers.rounds``, a shard's ``workers.sharding``."""

from __future__ import annotations

from celery import shared_task

from workers.rounds import execute_round
from workers.sharding import execute_shard


@shared_task(name="workers.tasks.run_round", acks_late=True, reject_on_worker_lost=True)
def run_round(experiment_id: int, round_number: int) -> None:
    execute_round(experiment_id, round_number, worker=run_round.request.hostname or "worker")


@shared_task(name="workers.tasks.run_shard", acks_late=True, reject_on_worker_lost=True)
def run_shard(experiment_id: int, round_number: int, index: int) -> None:
    execute_shard(experiment_id, round_number, index, worker=run_shard.request.hostname or "worker")
