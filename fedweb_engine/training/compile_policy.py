"""``compute.compile``: whether a trainer compiles its vectorised step, and under ``auto`` why.

A compiled step saves a share of every step's time (its loss, gradient and the flat gradient's
assembly fused around the matmuls, and no per-call transform of ``vmap(grad)``) and costs, per
window size, a package built once per machine (~30 CPU-seconds on a 2-core CPU) or loaded from the
machine's cache (milliseconds: :mod:`fedweb_engine.training.compiled`). So ``auto`` decides once
per trainer, after its first groups ran eagerly and were timed::

    saved = SAVED_SHARE × (eager seconds per client-step, measured) × (client-steps left, estimated)
    cost  = (window sizes without a package here) × (seconds to build one: this machine's last
            measure, else a default) + (sizes with one) × LOAD_SECONDS

and compiles when ``saved > cost``; the run's log gets the decision and these figures. The
client-steps left come from the spec (the remaining rounds' cohorts, local epochs, batch size)
and the clients' sizes; stragglers and dropouts only make the estimate high.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from fedweb_engine.data import federated as data_base
from fedweb_engine.spec.schema import Spec
from fedweb_engine.training import compiled, losses

# Measured on the 2-core AMD EPYC VM, engine_overhead's workload, one thread: rounds of compiled
# steps took ~0.6x the CPU time of eager ones; building a package took ~30 CPU-seconds (70 s of
# wall time at a load of 7-10), loading one a few milliseconds. No GPU figures yet: the same
# until a GPU run measures them.
SAVED_SHARE = 0.35
COLD_GRAPH_SECONDS = 60.0
LOAD_SECONDS = 0.05
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


def windows_expected(spec: Spec) -> list[int]:
    """The window sizes a run may compile: powers of two up to its largest group's bucket."""
    largest = min(
        spec.compute.client_group_size, max(spec.participation.schedule or [spec.participation.clients_per_round])
    )
    return [2**k for k in range(math.ceil(math.log2(max(1, largest))) + 1)]


def graphs_expected(spec: Spec) -> int:
    return len(windows_expected(spec))


def decide(
    *, seconds_per_client_step: float, client_steps: float, graphs: int, cached: int, build_seconds: float | None,
    missing: str | None = None,
) -> Decision:  # fmt: skip
    """Whether compiling pays (see the module's docstring): ``graphs`` window sizes, ``cached`` of
    them already built on this machine, ``build_seconds`` what building one took here last
    (None: never measured); ``missing``: why nothing can compile here."""
    if missing:
        return Decision(False, f"compute.compile auto: not compiling the vectorised step: {missing}")
    saved = SAVED_SHARE * seconds_per_client_step * client_steps
    per_build = build_seconds if build_seconds is not None else COLD_GRAPH_SECONDS
    to_build = graphs - cached
    cost = to_build * per_build + cached * LOAD_SECONDS
    pays = saved > cost
    source = "measured on this machine" if build_seconds is not None else "a default: none built here yet"
    where = f"{cached} in this machine's cache, {to_build} to build at ~{per_build:.0f} s each, {source}"
    where = where if to_build else "all in this machine's cache"
    hint = ""
    if not pays and to_build and saved > graphs * LOAD_SECONDS:
        hint = "; from this machine's cache it would pay: one run with compute.compile on builds them"
    return Decision(
        pays,
        f"compute.compile auto: {'compiling' if pays else 'not compiling'} the vectorised step: "
        f"~{client_steps:,.0f} client-steps left × {1e3 * seconds_per_client_step:.3f} ms eager (measured) × "
        f"{SAVED_SHARE:.0%} saved ≈ {saved:.1f} s {'>' if pays else '<='} ~{cost:.1f} s for {graphs} graphs ({where})"
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
        windows = windows_expected(self.spec)
        self.decision = decide(
            seconds_per_client_step=self.seconds / self.client_steps,
            client_steps=self.work_left(),
            graphs=len(windows),
            cached=len(compiled.cached_windows(step, windows)),
            build_seconds=compiled.recorded(step),
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
        self.steps = compiled.CompiledSteps(build, device, self.notes)
        self.build = build
        self.auto = AutoCompile(spec, work_left, device) if mode == "auto" and work_left is not None else None
        self.active = mode == "on"
        if self.active:
            self.notes.append("compute.compile on: compiling the vectorised step")

    def start_group(self, model: torch.nn.Module, x_train: torch.Tensor, y_train: torch.Tensor) -> float | None:
        """Called as a group starts: the start time when ``auto`` is still timing groups."""
        if not self.steps.signature:
            code = (self.build, losses.weighted_task_loss, data_base.as_input)
            spec = self.spec
            self.steps.signature = compiled.signature(dataclasses.asdict(spec.model), model, code, self.device,
                                                      spec.compute.precision, x_train, y_train,
                                                      spec.local.batch_size)  # fmt: skip
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
