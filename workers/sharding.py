"""A shard of a sharded round, on whichever worker took it (``orchestrator.fleet.sharding`` keeps the rows).

The worker brings its simulation to the end of the previous round (its cache, or the round
state the round before published), plans the round (every worker plans alike),
trains its shard into a partial-sum file, and, when it finds every shard done, concludes the
round: sums the partials in shard order, steps the server, publishes the round state,
records the round and lets the scheduler send the next one.
"""

from __future__ import annotations

import logging
import os
import time

from django.utils import timezone

from fedweb_engine.simulation import shards
from orchestrator.fleet import sharding
from orchestrator.models import Experiment, RoundMetric, Worker
from workers import oom, progress, runtime
from workers.rounds import finish_round, refuse_without_plugins, schedule_queue_of

log = logging.getLogger(__name__)


def execute_shard(experiment_id: int, round_number: int, index: int, *, worker: str) -> None:
    """Run shard ``index`` of round ``round_number`` (and conclude the round if it is the last)."""
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None or refuse_without_plugins(experiment, worker, f"shard {index + 1} of round {round_number}"):
        return  # unclaimed: reconcile sends the shard again, to a worker that has the plugins
    row = sharding.claim(experiment_id, round_number, index, worker, os.getpid())
    if row is None:
        return  # a duplicate, late or stopped delivery: the claim is the arbiter
    try:
        _run(experiment, row, worker)
    finally:
        schedule_queue_of(experiment_id, worker)  # this slot is free again, and the next round may be ready


def _run(experiment, row, worker: str):
    log_line = progress.to_experiment_log(experiment)
    Worker.objects.filter(hostname=worker).update(current_experiment=experiment)

    def plan_and_train(group_size: int | None):
        # Replanning at a smaller group size draws the very same batches (plan.draw_batches depends
        # on the clients' order only), so a retried shard trains what the other shards expect.
        sim = runtime.simulation_at(experiment, row.round, log_line, group_size=group_size)
        planned = shards.plan_round(sim, row.of)
        return sim, planned, None if row.done else shards.train_shard(sim, planned, row.index)

    try:
        sim, planned, partial = oom.with_retry(experiment, row.round, log_line, plan_and_train, runtime.forget)
        if partial is not None:
            shards.write_partial(sharding.partial_path(experiment.pk, row.round, row.index), partial)
            if not sharding.mark_done(row):
                return None  # another shard is still training: the last one to finish concludes
        partials = [shards.read_partial(sharding.partial_path(experiment.pk, row.round, k)) for k in range(row.of)]
        t0 = time.perf_counter() - (timezone.now() - row.created).total_seconds()  # since the round fanned out
        result = shards.conclude_round(sim, planned, partials, t0=t0)
        runtime.publish_state(experiment, sim, log_line)  # the next round's shards load it
        if runtime.checkpoint_due(row.round, experiment.total_rounds):
            runtime.save_checkpoint(experiment, sim)
    except Exception as e:
        log.exception("shard %s of round %s of experiment %s failed", row.index, row.round, experiment.pk)
        runtime.forget(experiment.pk)
        experiment.fail(f"Round {row.round} (shard {row.index + 1} of {row.of}) failed: {type(e).__name__}: {e}")
        return None
    finally:
        Worker.objects.filter(hostname=worker).update(current_experiment=None)
    metrics = result.to_dict()
    RoundMetric.record(experiment, metrics)
    return finish_round(experiment, row.round, metrics, sharded=True)
