"""Client algorithms: what clients do in local training, as a few hooks on the engine's flat tensors.

The server strategy (``algorithm.name``: FedAvg, FedAdam, a robust aggregator …) turns the
averaged update into the next global model; a *client algorithm* (``algorithm.client.name``)
changes the client's side of a round. Its hooks follow pfl-research's split of an algorithm:

1. **What the server sends** beside the model: :meth:`ClientAlgorithm.server_state` names
   ``[P]`` buffers the runner keeps (and checkpoints); the trainer sees them as ``ctx.server``.
2. **A per-step gradient correction** (an extra loss term given by its gradient):
   :meth:`ClientAlgorithm.correct` changes ``g`` ``[n, P]`` in place, for the ``n`` clients of
   the step, from their weights ``w`` ``[n, P]``, the model they received ``start`` (``[P]`` or
   ``[n, P]``) and ``ctx``. Called only when ``corrects`` is True: FedAvg adds no per-step work.
   What it reads that does not change during local training can be derived once per group in
   :meth:`ClientAlgorithm.prepare`, into ``ctx.scratch`` (SCAFFOLD's ``c − c_i``). Optionally,
   :meth:`ClientAlgorithm.correct_weights` writes the same rule for the weights of a plain SGD
   step (``w − lr·correction``), which spares the trainer a flat [n, P] gradient per step.
3. **What a client returns beside its update**: :meth:`ClientAlgorithm.finish` returns
   ``{name: [G, P]}`` after local training (names listed in ``returns``); the engine sums each
   over the clients that report and hands the sums to :meth:`ClientAlgorithm.fold`.
4. **Per-client state that persists across rounds**: :meth:`ClientAlgorithm.client_state`
   names rows ``{name: width}`` kept by a ``ClientStateStore`` (memory-mapped, bounded memory;
   rows of a client never seen read as zeros). The round's cohort's rows are gathered to the
   device as ``ctx.state[name]`` ``[G, width]``; ``finish`` rewrites them in place and the rows
   of the clients that reported are scattered back.
5. **How the server folds the aggregated extras** into its state: :meth:`ClientAlgorithm.fold`,
   which may also change the averaged update before the server strategy steps (FedDyn).

A personalisation method (Ditto) names in ``personal`` a client state of width ``P + 1`` holding
a personal model and an "initialised" flag: before the global pass the trainer trains it on the
same batches, starting from the global model the first time, with :meth:`correct_personal` as
the per-step correction; personal models are what federated evaluation then measures.

Every hook works on whole groups: the vectorised trainer calls them for ``[n, P]`` windows, the
sequential one for ``[1, P]`` rows, with the same arithmetic, so both paths agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor

from fedweb_engine.communication.codecs import make_codec


class StateStore(Protocol):
    """What the engine needs of a per-client state store (``fedweb_engine.state.client_rows.ClientStateStore``)."""

    def gather(self, client_ids: Tensor, device: torch.device) -> Tensor: ...

    def scatter(self, client_ids: Tensor, rows: Tensor) -> None: ...

    def commit(self, round_number: int) -> None: ...


@dataclass
class GroupContext:
    """What the hooks see of a group: the server's broadcast buffers and the clients' state rows."""

    server: Mapping[str, Tensor] = field(default_factory=dict)  # [P] each, on the trainer's device
    state: dict[str, Tensor] = field(default_factory=dict)  # [slots, width] each, on the trainer's device
    # [slots, ...] each: what prepare() derives once per group for the steps; never stored.
    scratch: dict[str, Tensor] = field(default_factory=dict)

    def window(self, lo: int, hi: int) -> GroupContext:
        """The same context for slots ``lo:hi`` (views: what a hook writes lands in the group's rows)."""
        return GroupContext(
            self.server, {k: v[lo:hi] for k, v in self.state.items()}, {k: v[lo:hi] for k, v in self.scratch.items()}
        )


class ClientAlgorithm:
    """FedAvg's client: plain local SGD. Subclass it and override the hooks you need.

    Built by the engine as ``cls(num_params=P, device=device, lr=client_lr, options=options)``.
    """

    corrects: bool = False  # whether correct() runs at every local step
    corrects_weights: bool = False  # whether correct_weights() writes correct()'s rule for the weights
    returns: tuple[str, ...] = ()  # names of the [G, P] values finish() returns beside the update
    personal: str | None = None  # a client state holding a personal model (width P + 1)
    changes_update: bool = False  # whether fold() changes the averaged update
    # What travels beside the model, counted in bytes_down / bytes_up as fp32 payloads: the server
    # buffers each sampled client receives, and the returned values each reporting client sends.
    # None: every server_state() buffer / every name in returns. List fewer for a buffer that stays
    # on the server, or a value the server derives from the update it already received.
    broadcasts: tuple[str, ...] | None = None
    uploads: tuple[str, ...] | None = None

    def __init__(self, *, num_params: int, device: torch.device | str, lr: float, options: Any):
        self.num_params = num_params
        self.device = torch.device(device)
        self.lr = lr
        self.options = options

    # -- declarations -------------------------------------------------------------------------

    def client_state(self) -> dict[str, int]:
        """Per-client state rows: ``{name: width}`` (zeros for a client never seen)."""
        return {}

    def server_state(self) -> dict[str, Tensor]:
        """The server's buffers, as first allocated (``[P]`` zeros, usually); broadcast to clients."""
        return {}

    @property
    def trivial(self) -> bool:
        """Nothing beside the update travels or persists (FedAvg, FedProx): any path can run it."""
        return not (self.client_state() or self.server_state() or self.returns or self.personal)

    # -- the client ---------------------------------------------------------------------------

    def prepare(self, ctx: GroupContext) -> None:
        """Once per group, before the local steps of the global pass (``corrects`` set): put into
        ``ctx.scratch`` ``[G, ...]`` values that :meth:`correct` reads at every step and that do
        not change during local training, so a step does not recompute them."""

    def correct(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        """Change the loss gradients ``g`` [n, P] of one local step in place."""

    def correct_weights(self, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        """Optional (``corrects_weights``): :meth:`correct`'s rule for a plain SGD step, on the weights
        ``w`` [n, P] in place: ``w ← w − lr·c``, where ``c`` is what :meth:`correct` would add to the
        gradient at ``w`` and ``lr`` is ``self.lr``. The vectorised trainer then takes each
        parameter's gradient and steps its view of ``w``, assembling no [n, P] gradient; where a step
        is not plain SGD (momentum, weight decay, fp16, an idle client in the window) it calls
        :meth:`correct`. ``w − lr·c`` is the rule: FedProx's μ·(w − start) is ``w.lerp_(start, lr·μ)``."""

    def correct_personal(self, g: Tensor, w: Tensor, start: Tensor, ctx: GroupContext) -> None:
        """The per-step correction of the personal pass (``personal`` set)."""

    def finish(self, delta: Tensor, steps: Tensor, ctx: GroupContext) -> dict[str, Tensor]:
        """After local training: ``delta`` [G, P] (the local update, not to be modified) and
        ``steps`` [G] (local steps taken); rewrite ``ctx.state`` rows in place and return the
        values named in ``returns``, ``[G, P]`` each."""
        return {}

    # -- the server ---------------------------------------------------------------------------

    def fold(
        self,
        server: dict[str, Tensor],
        avg_update: Tensor | None,
        sums: Mapping[str, Tensor],
        reported: Tensor,
        num_clients: int,
    ) -> None:
        """Fold the round's ``sums`` (Σ over reporting clients of each ``returns`` value, [P]) into
        ``server`` in place; ``reported`` is how many clients reported (a device scalar) and
        ``num_clients`` the population. ``avg_update`` (the weighted mean update the server
        strategy steps with; None for strategies that read every update) may be changed in place."""


@dataclass
class ClientRound:
    """A client algorithm's share of a simulation: the algorithm, the server's buffers, the state
    stores and the round's sums of what clients returned (all sized once)."""

    algorithm: ClientAlgorithm
    server: dict[str, Tensor]
    stores: Mapping[str, StateStore]
    sums: dict[str, Tensor]  # [P] on the server's device, zeroed by each round's training
    reported: Tensor  # [] clients that reported this round
    bytes_down: int = 0  # per sampled client, beside the model: the encoded broadcast buffers
    bytes_up: int = 0  # per reporting client, beside its update: the encoded uploaded values

    @classmethod
    def create(cls, algorithm: ClientAlgorithm, stores: Mapping[str, StateStore], device: torch.device) -> ClientRound:
        server = {k: v.to(device) for k, v in algorithm.server_state().items()}
        sums = {name: torch.zeros(algorithm.num_params, device=device) for name in algorithm.returns}
        down = _travelling(algorithm, "broadcasts", algorithm.broadcasts, server)
        up = _travelling(algorithm, "uploads", algorithm.uploads, sums)
        return cls(algorithm, server, dict(stores), sums, torch.zeros((), device=device), down, up)

    def zero_(self) -> None:
        for s in self.sums.values():
            s.zero_()
        self.reported.zero_()


def extra_bytes(algorithm: ClientAlgorithm) -> tuple[int, int]:
    """Bytes one client receives and sends beside the model and its update (SCAFFOLD's c and Δc_i),
    as a round counts them: fp32 payloads, whatever the links' codecs (the engine does not encode
    them). Sizes only: an algorithm built on the meta device allocates nothing."""
    returned = {name: torch.empty(algorithm.num_params, device="meta") for name in algorithm.returns}
    down = _travelling(algorithm, "broadcasts", algorithm.broadcasts, algorithm.server_state())
    return down, _travelling(algorithm, "uploads", algorithm.uploads, returned)


def _travelling(
    algorithm: ClientAlgorithm, what: str, names: tuple[str, ...] | None, values: Mapping[str, Tensor]
) -> int:
    """Bytes of one client's ``names`` (None: all of ``values``), each sent as an fp32 payload: the
    wire format of codecs.py (its header and 4 bytes a float), as the update's fp32 payload is counted."""
    names = tuple(values) if names is None else names
    unknown = sorted(set(names) - set(values))
    if unknown:
        raise ValueError(
            f"client algorithm {type(algorithm).__name__}: {what} names {unknown}, not among {sorted(values)}"
        )
    return sum(make_codec("fp32", [values[n].numel()]).payload_bytes() for n in names)
