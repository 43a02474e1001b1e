"""The out-of-memory retry: a round (or a shard of one) that runs out of GPU memory is run again
with half the client group size, down to one client at a time, then fails with a clear message.

The retry happens *outside* the ``except`` block. Inside it, the exception's traceback still
references every frame of the failed round, and through them its trainers, batches and
autograd buffers: ``empty_cache()`` there frees nothing, and the rebuild would need the memory
twice. So :func:`attempt` returns from its handler first; only then is the failed simulation
dropped (``forget``), its memory collected and the rebuild started, directly at the smaller size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import torch

from orchestrator.experiments.models import Experiment
from orchestrator.experiments.records import LogLine

T = TypeVar("T")


class RoundFailed(Exception):
    """A round that cannot be run; the message is shown to the user as is."""


def with_retry(
    experiment: Experiment,
    round_number: int,
    log_line: LogLine,
    run: Callable[[int | None], T],
    forget: Callable[[int], None],
) -> T:
    """``run(group_size)`` (None: the stored size) until it does not run out of GPU memory.

    After each out-of-memory error ``forget`` drops the experiment's simulation (its state is
    unknown after a failed round) and the halved size is stored on the experiment, so a rebuild
    on any worker keeps it.
    """
    group_size: int | None = None
    while True:
        done, value = attempt(run, group_size)
        if done:
            return value
        failed_at = group_size or current_group_size(experiment)
        forget(experiment.pk)  # the failed round's frames are gone by now: this frees its memory
        if failed_at <= 1:
            raise RoundFailed(f"Out of GPU memory in round {round_number}, even with client group size 1")
        group_size = max(1, failed_at // 2)
        Experiment.objects.filter(pk=experiment.pk).update(client_group_size=group_size)
        experiment.client_group_size = group_size
        log_line("warning", f"Out of GPU memory in round {round_number}; retrying with client group size {group_size}")


def attempt(run: Callable[[int | None], T], group_size: int | None) -> tuple[bool, T | None]:
    """(True, ``run(group_size)``), or (False, None) after a CUDA out-of-memory error. The handler
    keeps nothing: the exception and the frames it references are released when this returns."""
    try:
        return True, run(group_size)
    except torch.OutOfMemoryError:
        return False, None


def current_group_size(experiment: Experiment) -> int:
    """The client group size the experiment runs with: the stored one after a retry, else its spec's."""
    return experiment.client_group_size or experiment.parsed_spec().compute.client_group_size
