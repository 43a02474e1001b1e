"""``compute.compile``: whether a trainer compiles its vectorised step, and under ``auto`` why.

A compiled step saves a share of every step's time (it fuses the loss, its gradient and the flat
gradient's assembly around the matmuls) and costs seconds per graph to build: tens of seconds on
a 2-core CPU with an empty cache, a fraction of a second from this machine's compile cache. So
``auto`` decides once per trainer, after its first groups ran eagerly and were timed::

    saved = SAVED_SHARE × (eager seconds per client-step, measured) × (client-steps left, estimated)
    cost  = (graphs the run will compile) × (seconds per graph: this machine's record of the
             same step from its compile cache, else a default for an empty cache)

and compiles when ``saved > cost``; the run's log gets the decision and these figures. The
client-steps left come from the spec (the remaining rounds' cohorts, local epochs, batch size)
and the clients' sizes; stragglers and dropouts only make the estimate high.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from fedweb_engine.spec.schema import Spec
from fedweb_engine.training import compiled

# Measured on the 2-core AMD EPYC VM, engine_overhead's workload: a compiled step took 0.6x an
# eager one's CPU time (benchmarks/results/engine_overhead-full-cpu.json), a graph cost 8-14 s
# cold under load 7-10 and 0.2-0.4 s from the cache (plus ~2 s once per process for inductor).
# No GPU figures yet: the same until a GPU run measures them.
SAVED_SHARE = 0.35
COLD_GRAPH_SECONDS = 15.0
WARM_GRAPH_SECONDS = 0.6
WARM_UP_GROUPS = 1  # not timed: the first eager group pays one-off costs (first vmap, allocations)
TIMED_GROUPS = 1


@dataclass(frozen=True)
class Decision:
    compile: bool
    note: str


def client_steps_left(spec: Spec, sizes: np.ndarray, rounds_done: int) -> float:
    """The local steps of the rounds after ``rounds_done``, summed over their clients: each round's
    cohort times the mean step count of a client (epochs × its batches)."""
    per_client = spec.local.epochs * np.ceil(np.asarray(sizes, dtype=np.float64) / spec.local.batch_size)
    cohorts = sum(spec.cohort_size(r) for r in range(rounds_done + 1, spec.rounds + 1))
    return cohorts * float(per_client.mean()) if len(per_client) else 0.0


def graphs_expected(spec: Spec) -> int:
    """The window sizes a run compiles: powers of two up to its largest group."""
    largest = min(
        spec.compute.client_group_size, max(spec.participation.schedule or [spec.participation.clients_per_round])
    )
    return int(math.log2(max(1, largest))) + 1 + (largest & (largest - 1) != 0)


def decide(
    *, seconds_per_client_step: float, client_steps: float, graphs: int, last: dict | None, missing: str | None = None
) -> Decision:
    """Whether compiling pays (see the module's docstring). ``last``: this machine's record of the
    same step's compilation (:func:`fedweb_engine.training.compiled.recorded`); ``missing``: why
    nothing can compile here."""
    if missing:
        return Decision(False, f"compute.compile auto: not compiling the vectorised step: {missing}")
    saved = SAVED_SHARE * seconds_per_client_step * client_steps
    if last and "warm_seconds" in last:
        per_graph, source = last["warm_seconds"], "as measured from this machine's compile cache"
    elif last:
        per_graph, source = WARM_GRAPH_SECONDS, "in this machine's compile cache"
    else:
        per_graph, source = COLD_GRAPH_SECONDS, "not in this machine's compile cache"
    cost = graphs * per_graph
    verdict = "compiling" if saved > cost else "not compiling"
    hint = ""
    if not last and saved > graphs * WARM_GRAPH_SECONDS:
        hint = "; it would pay from the cache, which one run with compute.compile on fills for this machine"
    return Decision(
        saved > cost,
        f"compute.compile auto: {verdict} the vectorised step: ~{client_steps:,.0f} client-steps left × "
        f"{1e3 * seconds_per_client_step:.3f} ms eager (measured) × {SAVED_SHARE:.0%} saved ≈ {saved:.1f} s "
        f"{'>' if saved > cost else '<='} ~{cost:.1f} s to compile {graphs} graphs ({per_graph:.1f} s each, {source})"
        + hint,
    )


class AutoCompile:
    """One trainer's ``auto``: times its eager groups after a warm-up, then decides once."""

    def __init__(self, spec: Spec, work_left: Callable[[], float], device: torch.device):
        self.spec, self.work_left, self.device = spec, work_left, device
        self.decision: Decision | None = None
        self.groups = 0
        self.seconds = 0.0
        self.client_steps = 0.0

    def start(self) -> float | None:
        """The group's start time while still timing, else None."""
        return time.perf_counter() if self.decision is None else None

    def timed(self, started: float, client_steps: float, step: str) -> Decision | None:
        """Count a group that started at ``started``; the decision once enough groups were timed."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # while timing only: a few groups of the run
        self.groups += 1
        if self.groups <= WARM_UP_GROUPS:
            return None
        self.seconds += time.perf_counter() - started
        self.client_steps += client_steps
        if self.groups < WARM_UP_GROUPS + TIMED_GROUPS or self.client_steps <= 0:
            return None
        self.decision = decide(
            seconds_per_client_step=self.seconds / self.client_steps,
            client_steps=self.work_left(),
            graphs=graphs_expected(self.spec),
            last=compiled.recorded(step),
            missing=compiled.compiler_missing(self.device),
        )
        return self.decision


class StepCompiler:
    """A vectorised trainer's ``compute.compile``: whether it compiles now (``active``), its
    compiled steps, the ``auto`` decision and the notes for the run's log.

    ``build`` makes a fresh step function for a new graph; ``work_left`` estimates the client-steps
    the run has left (None: no estimate, as in an isolated round's child, so ``auto`` stays eager).
    """

    def __init__(self, mode: str, spec: Spec, device: torch.device, build: Callable[[], Callable],
                 notes: list[str] | None = None, work_left: Callable[[], float] | None = None):  # fmt: skip
        self.mode, self.spec, self.device = mode, spec, device
        self.notes = notes if notes is not None else []
        self.steps = compiled.CompiledSteps(build, "", self.notes)
        self.auto = AutoCompile(spec, work_left, device) if mode == "auto" and work_left is not None else None
        self.active = mode == "on"
        if self.active:
            self.notes.append("compute.compile on: compiling the vectorised step")

    def start_group(self, model: torch.nn.Module, x_train: torch.Tensor, y_train: torch.Tensor) -> float | None:
        """Called as a group starts: the start time when ``auto`` is still timing groups."""
        if not self.steps.signature:
            self.steps.signature = compiled.signature(model, self.device, self.spec.compute.precision, x_train,
                                                      y_train, self.spec.local.batch_size)  # fmt: skip
        return self.auto.start() if self.auto is not None else None

    def end_group(self, started: float, client_steps: float) -> None:
        """Called as a timed group ends (``started``: :meth:`start_group`'s time)."""
        decision = self.auto.timed(started, client_steps, self.steps.signature)
        if decision is not None:
            self.notes.append(decision.note)
            self.active = decision.compile

    def run(self, n: int, *args):
        """The compiled step for a window of ``n`` clients, or None (then eager from now on)."""
        out = self.steps(n, *args)
        if out is None:
            self.active = False
        return out

    def info(self) -> dict:
        """This run's compilation: the mode, whether it compiles, what it cost, the decision."""
        decision = self.auto.decision if self.auto is not None else None
        return {"mode": self.mode, "compiling": self.active, **self.steps.stats.to_dict(),
                "decision": decision.note if decision else None}  # fmt: skip


def compile_summary(spec: Spec, trainers: list) -> dict:
    """The compilation of a simulation's trainers: mode, whether any compiles, graphs, seconds and
    cache hits summed, the first failure and decision (sequential trainers compile nothing)."""
    infos = [t.compiler.info() for t in trainers if getattr(t, "compiler", None) is not None]
    return {
        "mode": spec.compute.compile,
        "compiling": any(i["compiling"] for i in infos),
        "graphs": sum(i["graphs"] for i in infos),
        "seconds": sum(i["seconds"] for i in infos),
        "cache_hits": sum(i["cache_hits"] for i in infos),
        "failed": next((i["failed"] for i in infos if i["failed"]), None),
        "decision": next((i["decision"] for i in infos if i["decision"]), None),
    }
