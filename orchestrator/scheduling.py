"""Where and when rounds run. The one place that sends round tasks.

Policy for now: first come, first served per queue. Each experiment has at most one round in
flight, and each worker runs one round at a time (``--concurrency 1``), so experiments sharing a
queue interleave at round boundaries in the order their rounds were enqueued. Smarter policies
(shortest-remaining-first, fair share, packing by memory) replace ``enqueue_next`` and nothing else.
"""

from __future__ import annotations

from django.conf import settings

from workers.engine.spec import Spec


def pick_queue(spec: Spec) -> str:
    """The queue for a spec's device: ``cpu`` -> cpu; ``cuda*`` -> gpu; ``auto`` -> gpu when a
    live worker serves the gpu queue, else cpu (so a CPU-only install still runs everything)."""
    from orchestrator.models import Worker

    cpu, gpu = _queue("cpu"), _queue("gpu")
    device = spec.compute.device
    if device == "cpu":
        return cpu
    if device.startswith("cuda"):
        return gpu
    has_gpu_worker = any(gpu in w.serve_queues() for w in Worker.live())
    return gpu if has_gpu_worker else cpu


def enqueue_next(experiment) -> None:
    """Send the experiment's next round to its queue."""
    from workers.tasks import run_round

    round_number = experiment.current_round + 1
    run_round.apply_async((experiment.pk, round_number), queue=experiment.queue or _queue("cpu"))


def _queue(kind: str) -> str:
    # FEDWEB_QUEUES may rename the queues; the first is the CPU one, the second the GPU one.
    queues = settings.FEDWEB_QUEUES
    if kind == "cpu":
        return queues[0]
    return queues[1] if len(queues) > 1 else queues[0]
