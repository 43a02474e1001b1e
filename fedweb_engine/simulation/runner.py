"""The simulation loop: one federated round at a time, with memory that stays flat.

A :class:`Simulation` owns everything that persists between rounds, allocated once when it is
built: the global model as one flat vector on the device, client-weight buffers sized by
``compute.client_group_size``, the server optimizer's state, the codecs' error-feedback state
and one NumPy generator that draws every random choice. A round then only reuses those buffers.

This file is the loop and the state it carries; the parts live by concern beside it: planning
(``training/plan.py``), client training on each device (``training/dispatch.py``), evaluation
(``training/evaluation.py``), the server step (``server_step.py``, ``strategies/``) and checkpoint
files (``state/checkpoint.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from fedweb_engine.communication.codecs import make_codec
from fedweb_engine.data import cache as data_cache
from fedweb_engine.data.federated import FederatedData
from fedweb_engine.isolation.parent import train_in_child
from fedweb_engine.models import build_model
from fedweb_engine.privacy.mechanism import GaussianMechanism
from fedweb_engine.probes import memory as probes
from fedweb_engine.progress_bar import ProgressBar
from fedweb_engine.results.round_result import (
    Counts,
    Memory,
    RoundResult,
    Timing,
    Traffic,
    fp32_bytes_formula,
    participation_histogram,
    quantile_fields,
)
from fedweb_engine.simulation.algorithm_share import SimulationState, StateStoreFactory
from fedweb_engine.simulation.server_step import server_step
from fedweb_engine.spec.schema import Spec
from fedweb_engine.state.client_state import ClientStates
from fedweb_engine.strategies import build_strategy
from fedweb_engine.training.client import build_trainer
from fedweb_engine.training.compile_policy import client_steps_left, compile_summary
from fedweb_engine.training.devices import describe, fits_on, free_memory, prepare, resolve_devices, synchronize
from fedweb_engine.training.dispatch import Collected, DeviceReplica, choose_vectorised, train_plans
from fedweb_engine.training.evaluation import client_evaluation, evaluate, evaluation_cohort
from fedweb_engine.training.flat import bind_flat
from fedweb_engine.training.plan import Cohort, plan_groups, sample_cohort

Callback = Callable[[RoundResult], bool | None]


class Simulation(SimulationState):
    """A federated-learning run: ``next_round()`` advances it by one round.

    ``device`` overrides ``spec.compute.device``. ``devices`` (a list of torch devices) overrides
    both; tests use it to drive the multi-device path on CPU.
    """

    def __init__(
        self,
        spec: Spec,
        *,
        device: str | None = None,
        devices: Sequence[torch.device] | None = None,
        callbacks: Iterable[Callback] = (),
        data_root: str | Path | None = None,  # where data.path may lead (see data.paths.confine)
        client_group_size: int | None = None,  # overrides the spec's (after an out-of-memory error)
        client_state_dir: str | Path | None = None,  # per-client state files (None: a temporary folder)
        client_state: StateStoreFactory | None = None,  # per-client state of a client algorithm (default: files)
        client_files: ClientStates | None = None,  # what keeps those files (a distributed run's members: none)
    ):
        if client_group_size is not None:  # before any buffer is sized: a rebuild starts small
            spec = spec.replace(compute={"client_group_size": max(1, client_group_size)})
        self.spec = spec
        self.callbacks = list(callbacks)
        self.devices = list(devices) if devices else resolve_devices(device or spec.compute.device)
        prepare(self.devices, spec.compute.precision)
        self.device = self.devices[0]
        self.device_name = describe(self.devices)
        self.round = 0
        self.rng = np.random.default_rng(spec.seed)

        data = data_cache.shared.get(spec.data, spec.seed, data_root=data_root)  # built once per process
        self.input_shape = data.input_shape
        # Copies, not views: process isolation moves tensor storage into shared memory, which
        # would leave a NumPy view pointing at freed memory.
        self.sizes = data.client_sizes().numpy().copy()
        self.offsets = data.offsets.numpy().copy()
        self.model = self._build_model(data)
        self.num_params = sum(p.numel() for p in self.model.parameters())
        self.layout = [p.numel() for p in self.model.parameters()]
        # The global model *is* this flat vector: the eval model's parameters are views of it.
        self.global_flat = torch.empty(self.num_params, device=self.device)
        bind_flat(self.model, self.global_flat)
        self.notes: list[str] = []  # what the experiment's log should say about this run's set-up
        sample = (data.x_train[:2], data.y_train[:2])  # rows to probe a plugin model's vmap support
        self.vectorised = choose_vectorised(spec, self.model, self.devices, sample=sample, notes=self.notes)
        self.replicas = [self._replica(d, data) for d in self.devices]
        self.test_x, self.test_y = self.replicas[0].data.x_test, self.replicas[0].data.y_test

        comm = spec.communication
        self.uplink = make_codec(comm.uplink.name, self.layout, comm.uplink.options)
        self.downlink = make_codec(comm.downlink.name, self.layout, comm.downlink.options)
        # The model as clients hold it after the downlink codec (lossy codecs make it differ).
        self.broadcast_weights = self.global_flat.clone()
        self.residuals = self._residual_store(data.num_clients)
        self.strategy = build_strategy(spec.algorithm, self.num_params, self.device)
        # Σ samples · decoded update over the round's clients, then their weighted mean.
        self.update_sum = torch.zeros(self.num_params, device=self.device)
        # How the round's updates reach the strategy (and, for a whole-cohort one, its rows).
        self.server_round = server_step(spec, self.strategy, self.num_params, self.device)
        self.child_peak_rss_mb: float | None = None  # after an isolated round: the child's peaks
        self.child_peak_vram_mb: float | None = None
        # Times each client was sampled: one counter per client, so memory does not grow with rounds.
        self.participation = torch.zeros(data.num_clients, dtype=torch.int64)
        self.eval_cohort = evaluation_cohort(spec, data.num_clients)
        self.dp = GaussianMechanism(spec.privacy, self.num_params, self.device) if self._private else None
        # Per-client rows (control variates, personal models) on disk, not in RAM: client_state.py.
        self.client_states = client_files if client_files is not None else ClientStates(client_state_dir)
        self.client = self._client_round(data.num_clients, client_state or self.client_states.open)

    # -- construction helpers -----------------------------------------------------------------

    def _build_model(self, data: FederatedData) -> torch.nn.Module:
        generator = torch.Generator().manual_seed(self.spec.seed)
        model = build_model(self.spec.model, data.input_shape, data.num_classes, generator=generator)
        return model.to(self.device).eval()

    def _replica(self, device: torch.device, data: FederatedData) -> DeviceReplica:
        on_device = data.to(device) if fits_on(device, data.nbytes()) else data.to(device, pin=True)
        return DeviceReplica(device, on_device, self._trainer(device))

    def _trainer(self, device: torch.device):
        """A trainer for ``device``; ``compute.compile: auto`` weighs the client-steps this run has left."""
        work_left = lambda: client_steps_left(self.spec, self.sizes, self.round)  # noqa: E731
        return build_trainer(self.spec, self.model, device, self.vectorised, self.notes, work_left)

    def set_client_group_size(self, n: int) -> None:
        """Rebuild the trainers with a smaller group. The old ones go first, so their buffers are
        free before the new ones are allocated; the data stays where it was placed (placing it
        again could try to pin data already on the GPU, with free memory at its lowest)."""
        self.spec = self.spec.replace(compute={"client_group_size": max(1, n)})
        placed, scales = [(r.device, r.data) for r in self.replicas], [r.trainer.scaler.scale for r in self.replicas]
        self.replicas = []
        free_memory(self.devices)
        self.replicas = [DeviceReplica(d, data, self._trainer(d)) for d, data in placed]
        for replica, scale in zip(self.replicas, scales, strict=True):
            replica.trainer.scaler.scale = scale

    @property
    def _private(self) -> bool:
        return self.spec.privacy.mechanism == "gaussian"

    def _residual_store(self, num_clients: int) -> torch.Tensor | None:
        comm = self.spec.communication
        if not (comm.uplink.name == "topk" and comm.error_feedback):
            return None
        # One residual row per client, allocated once: memory does not grow as clients appear.
        nbytes = num_clients * self.num_params * 4
        where = self.device if fits_on(self.device, nbytes, share=0.25) else torch.device("cpu")
        return torch.zeros(num_clients, self.num_params, device=where)

    # -- the round ----------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.round >= self.spec.rounds

    def next_round(self) -> RoundResult:
        """Sample, train, encode, aggregate, step the server, evaluate when due."""
        if self.done:
            raise RuntimeError(f"all {self.spec.rounds} rounds are done")
        t0 = time.perf_counter()
        for d in self.devices:
            probes.reset_peak(d)
        cohort = self.sample_cohort(self.rng)
        bytes_down = self._broadcast() * len(cohort.clients)
        t_train = time.perf_counter()
        clip_norm = self.dp.clip_norm if self.dp else None
        stats = self._train_cohort(cohort, clip_norm)
        return self.conclude_round(cohort, stats, bytes_down=bytes_down, t0=t0, t_train=t_train, clip_norm=clip_norm)

    def sample_cohort(self, rng: np.random.Generator) -> Cohort:
        """Draw the cohort of the next round from ``rng`` (the simulation's own, or a copy of it)."""
        spec = self.spec
        return sample_cohort(
            rng,
            self.sizes,
            spec.cohort_size(self.round + 1),
            epochs=spec.local.epochs,
            batch_size=spec.local.batch_size,
            straggler_fraction=spec.heterogeneity.straggler_fraction,
            straggler_policy=spec.heterogeneity.straggler_policy,
            dropout=spec.heterogeneity.dropout,
        )

    def conclude_round(
        self,
        cohort: Cohort,
        stats: dict[str, torch.Tensor],
        *,
        bytes_down: int,
        t0: float,
        t_train: float,
        clip_norm: float | None = None,
        evaluate: bool = True,
    ) -> RoundResult:
        """Step the server with ``update_sum`` (Σ samples · update, or Σ clipped updates under DP) or
        the ``collected`` rows, evaluate when due (unless ``evaluate`` is false: a distributed round's
        other ranks), return the round's result (also for distributed rounds: rank_round.py)."""
        r = self.round + 1
        self.participation[torch.from_numpy(np.asarray(cohort.clients, dtype=np.int64))] += 1
        before = self.global_flat.clone()  # for update_norm: one model-sized copy, freed with the round
        self._step_server(cohort, stats)
        self._commit_client_state(r)
        synchronize(self.devices)
        train_seconds = time.perf_counter() - t_train
        evaluation = self._round_evaluation(r, cohort, evaluate)
        self.client_states.commit(r)  # the rows the cohort scattered become round r's
        self.round = r
        memory = self._memory()
        timing = Timing(round_seconds=time.perf_counter() - t0, train_seconds=train_seconds)
        return RoundResult.from_parts(
            self._counts(r, cohort, stats),
            self._traffic(cohort, bytes_down),
            timing,
            memory,
            self._training_losses(stats),
            evaluation,
            self._privacy(stats, clip_norm, cohort),  # adapts the clip norm: after everything that reads it
            {
                "participation_histogram": participation_histogram(self.participation.numpy()),
                "update_norm": float(torch.linalg.vector_norm(self.global_flat - before)),
            },
        )

    # -- the round's steps, in conclude_round's order -------------------------------------------

    def _step_server(self, cohort: Cohort, stats: dict[str, torch.Tensor]) -> None:
        """The server's step with the round's updates; none when no client reported (no update)."""
        if float(stats["weight"]) > 0:
            self.server_round.step(self, cohort, stats)

    @property
    def collected(self) -> Collected | None:
        """The round's decoded updates, for a whole-cohort strategy (None: they are summed)."""
        return self.server_round.collected if self.server_round else None

    def _round_evaluation(self, r: int, cohort: Cohort, evaluate: bool) -> dict:
        """Test loss and accuracy, and the per-client views, on the rounds evaluation is due."""
        if not evaluate or not (r % self.spec.evaluation.every == 0 or r == self.spec.rounds):
            return {"test_loss": None, "test_accuracy": None}
        test_loss, test_accuracy = self.evaluate()
        clients = client_evaluation(self.model, self.replicas[0].data, self._evaluated(cohort), self.spec)
        personal = self._personal_evaluation(cohort)  # Ditto: each client's own model too
        return {"test_loss": test_loss, "test_accuracy": test_accuracy, **clients, **personal}

    def _memory(self) -> Memory:
        """RSS, threads and VRAM after the round (with an isolated child's peak), and the devices."""
        return Memory.of(probes.probe_devices(self.devices, self.child_peak_vram_mb), self.device_name)

    def _counts(self, r: int, cohort: Cohort, stats: dict[str, torch.Tensor]) -> Counts:
        c = cohort  # round, participants, completed, stragglers, dropped, samples
        return Counts(r, len(c.clients), len(c.trained), c.stragglers, c.dropped, int(stats["samples"]))

    def _traffic(self, cohort: Cohort, bytes_down: int) -> Traffic:
        # A client algorithm's extras travel beside the model and the update (SCAFFOLD's c and Δc_i).
        extra_down, extra_up = (self.client.bytes_down, self.client.bytes_up) if self.client else (0, 0)
        sampled = len(cohort.clients)
        return Traffic(
            bytes_down=bytes_down + extra_down * sampled,
            bytes_up=(self.uplink.payload_bytes() + extra_up) * len(cohort.trained),
            bytes_formula=fp32_bytes_formula(self.num_params, sampled),
            bytes_extra_down=extra_down * sampled,
            bytes_extra_up=extra_up * len(cohort.trained),
        )

    def _training_losses(self, stats: dict[str, torch.Tensor]) -> dict:
        """The mean local loss (weighted like the update) and the quantiles of the clients' losses."""
        total_weight = float(stats["weight"])
        losses = stats["client_losses"].cpu().tolist() if "client_losses" in stats else []
        mean = float(stats["loss"]) / total_weight if total_weight > 0 else None
        return {"train_loss": mean, **quantile_fields("train_loss", losses)}

    def _privacy(self, stats: dict[str, torch.Tensor], clip_norm: float | None, cohort: Cohort) -> dict:
        if not self.dp:
            return {}
        return self.dp.round_fields(stats, clip_norm, len(cohort.clients), float(stats["weight"]), self.rng)

    def run(self, rounds: int | None = None, *, progress: bool = True) -> list[RoundResult]:
        """Run up to ``rounds`` more rounds (default: to the end) and return their results; stop
        early when a callback says so. ``progress`` shows a bar (round, loss, accuracy, ETA; a
        widget in a notebook, else on stderr)."""
        results: list[RoundResult] = []
        target = self.spec.rounds if rounds is None else min(self.spec.rounds, self.round + rounds)
        with ProgressBar(self.spec.rounds, initial=self.round, enabled=progress, notebook=True) as bar:
            while self.round < target:
                results.append(self.next_round())
                bar.update(results[-1])
                if any(cb(results[-1]) for cb in self.callbacks):
                    break
        return results

    def _broadcast(self, into: torch.Tensor | None = None) -> int:
        """Send the global model down (into ``broadcast_weights``, or ``into``, which holds a copy of
        it); return the payload bytes per client.

        fp32/fp16/int8 send the (quantised) weights; top-k sends the change since the last
        broadcast, so ``broadcast_weights`` tracks what clients hold and carries the compression error.
        """
        codec = self.downlink
        held = self.broadcast_weights if into is None else into
        if codec.name == "fp32":
            held.copy_(self.global_flat)
        elif codec.name == "topk":
            payload = codec.encode((self.global_flat - held).unsqueeze(0))
            held.add_(codec.decode(payload)[0])
        else:
            held.copy_(codec.decode(codec.encode(self.global_flat.unsqueeze(0)))[0])
        return codec.payload_bytes()

    def _evaluated(self, cohort: Cohort) -> torch.Tensor | None:
        # Federated evaluation's clients: the fixed cohort, the round's sampled clients, or none.
        mode = self.spec.evaluation.clients
        if mode == "none":
            return None
        return self.eval_cohort if mode == "cohort" else torch.as_tensor(np.asarray(cohort.clients, dtype=np.int64))

    def _train_cohort(self, cohort: Cohort, clip_norm: float | None = None) -> dict[str, torch.Tensor]:
        """Plan every group (drawing from the RNG here, in the parent), then train them.

        With ``compute.isolation == "process"`` the training runs in a fresh child process that
        exits after the round, taking any memory leaked by the model code with it.
        """
        spec = self.spec
        plans = plan_groups(
            self.rng,
            cohort,
            self.offsets,
            group_size=spec.compute.client_group_size,
            epochs=spec.local.epochs,
            batch_size=spec.local.batch_size,
        )
        if spec.compute.isolation == "process":
            stats, self.child_peak_rss_mb, self.child_peak_vram_mb = train_in_child(
                spec, self.replicas, plans, self.broadcast_weights, self.residuals, self.update_sum,
                vectorised=self.vectorised, clip_norm=clip_norm, collect=self.collected,
            )  # fmt: skip
            return stats
        return train_plans(
            self.replicas, plans, self.broadcast_weights, self.uplink, self.residuals, self.update_sum, clip_norm,
            self.collected, self.client,
        )  # fmt: skip

    def evaluate(self) -> tuple[float, float]:
        """Test loss and accuracy of the global model, in large batches; one host sync."""
        return evaluate(
            self.model, self.test_x, self.test_y, batch_size=self.spec.evaluation.batch_size, device=self.device
        )

    def evaluate_train(self) -> tuple[float, float]:
        """Loss and accuracy of the global model on every client's training data.

        This is the global objective of the FedProx paper's plots (not the clients' local
        losses that ``RoundResult.train_loss`` reports); it reads all the data, so it is not
        part of a round.
        """
        data = self.replicas[0].data
        return evaluate(
            self.model, data.x_train, data.y_train, batch_size=self.spec.evaluation.batch_size, device=self.device
        )

    def cache_info(self) -> dict[str, int]:
        """Sizes of every cache the engine keeps (bounded by the group size, not the cohort sizes)."""
        info: dict[str, int] = {}
        for i, r in enumerate(self.replicas):
            for key, value in r.trainer.cache_info().items():
                info[f"{r.device}#{i}.{key}"] = value
        return info

    def compile_info(self) -> dict:
        """What compiling the vectorised step decided and cost this simulation, over its devices
        (``compute.compile``: see fedweb_engine/training/compile_policy.py)."""
        return compile_summary(self.spec, [r.trainer for r in self.replicas])

    def close(self) -> None:
        """Drop references to the data, model and buffers so their memory can be reused."""
        self.replicas = []
        self.model = None
        self.update_sum = self.broadcast_weights = self.residuals = self.server_round = None
        self.client_states.close()
        self.client = None
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
