"""What a Simulation carries beyond one round: its client algorithm's share (server buffers, per-client
state, folding, personal evaluation) and its checkpoints. A mixin of ``runner.Simulation``, kept apart
so the loop itself (runner.py) stays one screenful of concerns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Self

import torch

from fedweb_engine.algorithms import ClientRound, StateStore, build_algorithm
from fedweb_engine.algorithms.personal import personal_evaluation
from fedweb_engine.spec.schema import Spec
from fedweb_engine.state.checkpoint import read_checkpoint, write_checkpoint
from fedweb_engine.state.client_state import snapshot_folder
from fedweb_engine.training.plan import Cohort

# (name such as "scaffold.c_i", num_clients, width) -> a store of [num_clients, width] float32 rows.
StateStoreFactory = Callable[[str, int, int], StateStore]


class SimulationState:
    """The checkpoint and client-algorithm half of :class:`fedweb_engine.simulation.runner.Simulation`."""

    # -- the client algorithm (algorithm.client): server buffers, per-client state, folding ----------

    def _client_round(self, num_clients: int, make_store: StateStoreFactory | None) -> ClientRound | None:
        """The client algorithm's share of the run, or None when nothing but the update travels
        (FedAvg, FedProx: their hooks run inside the trainers, the round is as before)."""
        client = self.spec.algorithm.client
        algorithm = build_algorithm(
            client.name, client.options, num_params=self.num_params, device=self.device, lr=self.spec.local.lr
        )
        if algorithm.trivial:
            return None
        widths = algorithm.client_state()
        if widths and make_store is None:
            raise RuntimeError(
                f"client algorithm {client.name!r} keeps per-client state: the simulation needs a state store"
            )
        stores = {name: make_store(f"{client.name}.{name}", num_clients, width) for name, width in widths.items()}
        return ClientRound.create(algorithm, stores, self.device)

    def _fold_client(self, avg: torch.Tensor | None) -> None:
        if self.client is not None:
            c = self.client
            c.algorithm.fold(c.server, avg, c.sums, c.reported, len(self.sizes))

    def _commit_client_state(self, round_number: int) -> None:
        for store in self.client.stores.values() if self.client else ():
            store.commit(round_number)

    def _personal_evaluation(self, cohort: Cohort) -> dict:
        """Ditto's personal models on the evaluated clients' test splits, beside the global model's
        client_accuracy_* (empty for other algorithms)."""
        personal = self.client.algorithm.personal if self.client else None
        if personal is None:
            return {}
        data, clients = self.replicas[0].data, self._evaluated(cohort)
        return personal_evaluation(self.model, self.global_flat, data, clients, self.client.stores[personal], self.spec)

    # -- checkpoints ----------------------------------------------------------------------------

    def state_dict(self) -> tuple[dict[str, torch.Tensor], dict]:
        """Tensors and JSON metadata that let a new process continue exactly where this one is."""
        # "received" is the file's name for broadcast_weights (kept: older checkpoints must load).
        tensors = {"global": self.global_flat, "received": self.broadcast_weights, "participation": self.participation}
        if self.residuals is not None:
            tensors["residuals"] = self.residuals
        for key, value in self.strategy.state_dict().items():
            tensors[f"strategy.{key}"] = value
        for key, value in (self.client.server if self.client else {}).items():
            tensors[f"client.{key}"] = value
        meta = {
            "spec": self.spec.to_dict(),
            "round": self.round,
            "rng": self.rng.bit_generator.state,
            "loss_scales": [r.trainer.scaler.scale for r in self.replicas],
            "clip_norm": self.dp.clip_norm if self.dp else None,  # adaptive clipping moves it
            "client_state": self.client_states.describe(),  # the rows stay in their files
        }
        return tensors, meta

    def load_state_dict(self, tensors: dict[str, torch.Tensor], meta: dict) -> None:
        """Continue from what :meth:`state_dict` returned (for a simulation built from the same spec)."""
        self.global_flat.copy_(tensors["global"])
        self.broadcast_weights.copy_(tensors["received"])
        if self.residuals is not None:
            self.residuals.copy_(tensors["residuals"])
        self.strategy.load_state_dict(
            {k.removeprefix("strategy."): v.to(self.device) for k, v in tensors.items() if k.startswith("strategy.")}
        )
        for key, value in (self.client.server if self.client else {}).items():
            value.copy_(tensors[f"client.{key}"])
        if "participation" in tensors:  # checkpoints written before per-client views have none
            self.participation.copy_(tensors["participation"])
        if self.dp and meta.get("clip_norm") is not None:
            self.dp.clip_norm = float(meta["clip_norm"])
        self.round = int(meta["round"])
        client_state = meta.get("client_state") or {}  # StateUnavailable if the files are past it
        self.client_states.restore(self.round, client_state, snapshot=client_state.get("snapshot"))
        self.rng.bit_generator.state = meta["rng"]
        for replica, scale in zip(self.replicas, meta.get("loss_scales", []), strict=False):
            replica.trainer.scaler.scale = scale

    def save_checkpoint(self, path: str | Path) -> int:
        """Write one safetensors file (no pickle) atomically, the client state's rows copied into a
        folder beside it first (client_states.snapshot_folder); returns the file's size in bytes."""
        tensors, meta = self.state_dict()
        if self.client_states.save_snapshot(snapshot_folder(path)):
            meta["client_state"]["snapshot"] = snapshot_folder(path).name  # read_checkpoint resolves it
        return write_checkpoint(path, tensors, meta)

    @classmethod
    def from_checkpoint(cls, path: str | Path, *, device: str | None = None, **kwargs) -> Self:
        """A simulation that continues exactly where the one that wrote ``path`` stopped."""
        tensors, meta = read_checkpoint(path)
        sim = cls(Spec.from_stored(meta["spec"]), device=device, **kwargs)  # written before any newer bounds
        sim.load_state_dict(tensors, meta)
        return sim
