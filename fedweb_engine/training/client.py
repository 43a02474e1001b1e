"""Client training: local SGD for a group of clients, vectorised with torch.func or one by one.

Both trainers start every client from the model it received, follow the same :class:`GroupPlan`
and apply the same update rule (:func:`sgd_update_`, with the client algorithm's per-step
correction: see :mod:`fedweb_engine.algorithms.base`), so they produce the same weights up to
floating-point reordering. Client weights live in a preallocated ``[G, P]`` buffer on the device;
nothing is allocated per client or per round beyond the autograd temporaries of a step, whose
shapes depend only on the group's slot count.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from fedweb_engine.algorithms import ClientAlgorithm, GroupContext, build_algorithm
from fedweb_engine.data.federated import FederatedData, as_input, gather
from fedweb_engine.spec.schema import LocalSpec, Spec
from fedweb_engine.training.compile_policy import StepCompiler
from fedweb_engine.training.flat import GroupOutput, autocast, bind_flat, flat_layout, param_views
from fedweb_engine.training.losses import LossScaler, batch_weights, task_loss, weighted_task_loss
from fedweb_engine.training.plan import GroupPlan, max_slots
from fedweb_engine.training.vectorise import step_windows


def sgd_update_(
    w: torch.Tensor,
    g: torch.Tensor,
    start: torch.Tensor,
    buf: torch.Tensor | None,
    active: torch.Tensor | None,
    local: LocalSpec,
    correct: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], None] | None = None,
) -> None:
    """One SGD step on flat weights ``w`` [G, P] in place; rows with ``active == 0`` keep their weights
    (``active`` None: every row steps, with no per-row multiplier).

    ``g`` is the loss gradient (overwritten); ``start`` the weights the clients received (a
    proximal anchor, [P] or [G, P]); ``buf`` the momentum buffer (PyTorch's SGD rule, dampening 0);
    ``local`` the spec's local section (rate, momentum, weight decay); ``correct(g, w, start)`` the
    client algorithm's gradient correction (after weight decay).
    """
    if local.weight_decay:
        g.add_(w, alpha=local.weight_decay)
    if correct is not None:
        correct(g, w, start)
    if buf is not None:
        buf.mul_(local.momentum).add_(g)
        g = buf
    if active is None:
        w.sub_(g, alpha=local.lr)
    else:
        w.addcmul_(g, (active * -local.lr).unsqueeze(1))


def sgd_views_update_(
    w: torch.Tensor,
    views: Iterable[torch.Tensor],
    grads: Iterable[torch.Tensor],
    start: torch.Tensor,
    local: LocalSpec,
    correct_weights: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
) -> None:
    """:func:`sgd_update_`'s step for plain SGD (every row steps; no momentum or weight decay) from
    per-parameter gradients, with no [n, P] gradient assembled: ``correct_weights(w, start)`` (the
    client algorithm's correction in weight form) moves ``w`` [n, P] by ``−lr·correction`` at the
    weights the gradients were taken at, then each parameter's view into ``w`` takes ``−lr·g``."""
    if correct_weights is not None:
        correct_weights(w, start)
    for view, g in zip(views, grads, strict=True):
        view.sub_(g, alpha=local.lr)


class VectorTrainer:
    """Trains up to ``group_size`` clients at once with ``vmap(grad(loss))`` over stacked weights."""

    def __init__(
        self,
        model: nn.Module,
        group_size: int,
        local: LocalSpec,
        device: torch.device,
        algorithm: ClientAlgorithm | None = None,
        precision: str = "fp32",
    ):
        self.model, self.local, self.precision, self.device, self.algorithm = model, local, precision, device, algorithm
        self.names, self.shapes, self.sizes = flat_layout(model)
        P = sum(self.sizes)
        self.W = torch.empty(group_size, P, device=device)
        self.buf = torch.zeros(group_size, P, device=device) if local.momentum else None
        self.scaler = LossScaler(precision == "fp16", device)
        self._eager: dict[bool, object] = {}  # by views? -> the eager step (any window size)
        self.compiler: StepCompiler | None = None  # compute.compile (build_trainer sets it)
        self.by_views = True  # plain SGD steps per parameter where they may (False: always flat)

    @property
    def group_size(self) -> int:
        return self.W.shape[0]

    @property
    def compile(self) -> bool:
        """Whether steps run compiled now (see training/compile_policy.py)."""
        return self.compiler is not None and self.compiler.active

    def cache_info(self) -> dict[str, int]:
        return {"vmapped_steps": len(self.compiler.steps.fns) if self.compiler else 0}

    def _unflatten(self, w: torch.Tensor) -> dict[str, torch.Tensor]:
        """Parameter views of one client's flat weights (called under vmap).

        One ``split`` rather than a slice per tensor: its backward is a single concatenation,
        where per-tensor slices would each scatter into a zero-filled [G, P] gradient.
        """
        parts = w.split(self.sizes)
        return {name: part.view(shape) for name, part, shape in zip(self.names, parts, self.shapes, strict=True)}

    def _step_fn(self, slots: int, views: bool = False):
        """The eager step for ``slots`` clients (any count): ``vmap(grad(loss))`` of their flat
        weights [slots, P] (one [slots, P] gradient) or, with ``views``, of their parameters' views
        (one gradient per parameter: see :meth:`_view_gradients`). Built once each."""
        if views not in self._eager:
            self._eager[views] = self._build_step(views)
        return self._eager[views]

    def _build_step(self, views: bool = False):
        """A new ``vmap(grad(loss))`` (compiled steps trace one each: see training/compiled.py)."""
        model, device, precision, unflatten = self.model, self.device, self.precision, self._unflatten
        scaled = self.scaler.enabled  # fp32/bf16: no multiply by 1.0 (an op forward and backward)

        def loss(w, x, y, weights, scale):
            # Differentiating with respect to the flat weights makes vmap(grad) return one
            # [G, P] gradient, ready for the flat update (split's backward assembles it). The loss
            # scale is an argument, not a captured tensor: a compiled graph would freeze it.
            with autocast(device, precision):
                out = functional_call(model, w if views else unflatten(w), (as_input(x),))
            value = weighted_task_loss(out, y, weights)
            return (value * scale if scaled else value), value.detach()

        return vmap(grad(loss, has_aux=True), in_dims=(0, 0, 0, 0, None))

    def _flat_step(self, w: torch.Tensor, *args):
        """(gradients [n, P], losses [n]) of one step for the clients ``w`` [n, P], compiled or not."""
        args = (w, *args, self.scaler.tensor)
        if self.compile:
            out = self.compiler.run(w.shape[0], *args)
            if out is not None:
                return out
        return self._step_fn(w.shape[0])(*args)

    def _view_gradients(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor):
        """(gradients, one per parameter ``[n, *shape]``, and losses [n]) of one step for the clients
        ``w`` [n, P]: ``vmap(grad)`` with respect to each parameter's view of the rows, so no [n, P]
        gradient is assembled.

        Not plain autograd through the vmapped forward (the gradient of the clients' summed losses,
        the same numbers): autograd then differentiates the batched ``bmm`` itself, whose rule
        computes a linear layer's weight gradient as ``xᵀ·g`` ([n, in, out]), which MKL runs about
        4x slower on an AMD EPYC than the ``gᵀ·x`` ([n, out, in]) that ``grad`` under ``vmap`` picks
        for a row-major weight (measured: 1.5 against 0.36 ms for 64 clients of the 784->10 model)."""
        params = param_views(w, self.names, self.shapes, self.sizes)
        grads, losses = self._step_fn(w.shape[0], views=True)(params, x, y, weights, self.scaler.tensor)
        return list(grads.values()), losses

    def gradients(self, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, mask: torch.Tensor):
        """(gradients [slots, P], losses [slots]) of one step for clients ``w`` [slots, P] on their
        batches ``x``/``y`` [slots, B, ...], as stored, ``mask`` [slots, B] marking real samples;
        what :meth:`train` runs per step."""
        return self._flat_step(w, x, y, batch_weights(mask))

    def train(
        self, start: torch.Tensor, plan: GroupPlan, data: FederatedData, ctx: GroupContext | None = None
    ) -> GroupOutput:
        """Train the plan's clients from ``start`` [P] (or [slots, P]); return their deltas.

        ``ctx`` carries the client algorithm's server buffers and the clients' state rows; a
        personal model (Ditto) is trained first, on the same batches, and written into its rows.
        """
        slots = plan.idx.shape[0]
        W = self.W[:slots]
        timing = self.compiler.start_group(self.model, data.x_train, data.y_train) if self.compiler else None
        # Indices go where the data is (the GPU, or the host when the data stays pinned there);
        # the sample weights and masks go where the arithmetic is. All step-major ([T, slots, ...]),
        # so that each step's window is one contiguous block.
        idx = plan.idx.transpose(0, 1).contiguous().to(data.device, non_blocking=True)
        weights = batch_weights(plan.mask).transpose(0, 1).contiguous().to(self.device, non_blocking=True)
        active = plan.active.t().contiguous().to(self.device, non_blocking=True)
        # Power-of-two windows where shapes must stay few (compiled steps, a GPU's allocator; on a
        # CPU up to two a step), else exact ones (eager on a CPU), which compute no idle client.
        on_cpu = self.device.type == "cpu"
        windows = step_windows(plan.active, bucketed=self.compile or not on_cpu, pieces=on_cpu)
        algorithm, ctx = self.algorithm, ctx or GroupContext()
        if algorithm is not None and algorithm.personal is not None:
            rows = ctx.state[algorithm.personal]
            P = W.shape[1]
            W.copy_(torch.where(rows[:, P:] > 0, rows[:, :P], start))  # never trained: start from the model
            self._local_sgd(W, start, idx, weights, active, windows, data, None, algorithm.correct_personal, ctx)
            rows[:, :P].copy_(W)
            rows[:, P].fill_(1.0)
        W.copy_(start.expand(slots, -1) if start.dim() == 1 else start)
        loss_sum = torch.zeros(slots, device=self.device)
        correct = algorithm.correct if algorithm is not None and algorithm.corrects else None
        if correct is not None:
            algorithm.prepare(ctx)
        self._local_sgd(W, start, idx, weights, active, windows, data, loss_sum, correct, ctx)
        W.sub_(start)
        if timing is not None:  # compute.compile auto, still timing eager groups
            self.compiler.end_group(timing, float(plan.active.sum()))
        return GroupOutput(
            delta=W,
            loss_sum=loss_sum,
            steps=active.sum(dim=0),
            samples=plan.mask.sum().to(self.device, non_blocking=True),
        )

    def _local_sgd(self, W, start, idx, weights, active, windows, data, loss_sum, correct, ctx) -> None:
        """The plan's local steps on ``W`` [slots, P] in place (``loss_sum`` [slots] collects losses)."""
        buf = None
        if self.buf is not None:
            buf = self.buf[: W.shape[0]]
            buf.zero_()
        step_correction = None
        scaled = self.scaler.enabled
        by_views = self._steps_by_views(correct)
        for t, lo, hi, full in windows:
            # Only the window of slots that still have steps is computed (clients are sorted by
            # step count, so it shrinks as short clients finish). In a window where every client
            # steps (``full``) and no loss scaler may skip one, the masks multiply by ones: skipped.
            rows = idx[t, lo:hi]
            x = gather(data.x_train, rows, self.device)  # as stored: the step converts it (fused when compiled)
            y = gather(data.y_train, rows, self.device)
            anchor = start if start.dim() == 1 else start[lo:hi]
            if by_views and full:
                grads, loss = self._view_gradients(W[lo:hi], x, y, weights[t, lo:hi])
                views = param_views(W[lo:hi], self.names, self.shapes, self.sizes).values()
                if correct is not None:
                    step_correction = _bound(self.algorithm.correct_weights, ctx.window(lo, hi), weights_only=True)
                sgd_views_update_(W[lo:hi], views, grads, anchor, self.local, step_correction)
            else:
                g, loss = self._flat_step(W[lo:hi], x, y, weights[t, lo:hi])
                a = None if full and not scaled else self.scaler.unscale_and_check(g, active[t, lo:hi])
                if correct is not None:
                    step_correction = _bound(correct, ctx.window(lo, hi))
                sgd_update_(W[lo:hi], g, anchor, None if buf is None else buf[lo:hi], a, self.local, step_correction)
            if loss_sum is not None:
                loss_sum[lo:hi].add_(loss if full else loss * active[t, lo:hi])

    def _steps_by_views(self, correct) -> bool:
        """Whether this pass's full windows step parameter by parameter (:func:`sgd_views_update_`):
        eager plain SGD (no momentum, weight decay or loss scaling), with no correction or with the
        global pass's when the algorithm also writes it for the weights, at this trainer's rate."""
        local, algorithm = self.local, self.algorithm
        if not self.by_views or self.compile or self.buf is not None or local.weight_decay or self.scaler.enabled:
            return False
        if correct is None:
            return True
        return algorithm.corrects_weights and correct == algorithm.correct and algorithm.lr == local.lr


class SequentialTrainer:
    """Trains clients one after another on the model itself.

    Used for models vmap cannot handle, and by ``training: auto`` for CNNs on a CPU (where one
    client's batch runs faster than a vmapped, grouped convolution).

    The model's parameters are views of ``self.w`` (see :func:`bind_flat`), so loading a client's
    starting weights is one copy and the update rule is the same flat :func:`sgd_update_`.
    """

    def __init__(
        self,
        model: nn.Module,
        group_size: int,
        local: LocalSpec,
        device: torch.device,
        algorithm: ClientAlgorithm | None = None,
        precision: str = "fp32",
    ):
        self.model = model
        self.local = local
        self.precision = precision
        self.device = device
        self.algorithm = algorithm
        P = sum(p.numel() for p in model.parameters())
        self.w = torch.empty(P, device=device)
        bind_flat(model, self.w)
        self.params = list(model.parameters())
        # Gradients accumulate in place into views of one flat buffer, so the update below is
        # a few flat vector ops with no per-step concatenation.
        self.g = torch.zeros(1, P, device=device)
        offset = 0
        for p in self.params:
            p.grad = self.g[0, offset : offset + p.numel()].view(p.shape)
            offset += p.numel()
        self.buf = torch.zeros(1, P, device=device) if local.momentum else None
        self.out = torch.empty(group_size, P, device=device)
        self.scaler = LossScaler(precision == "fp16", device)

    @property
    def group_size(self) -> int:
        return self.out.shape[0]

    def cache_info(self) -> dict[str, int]:
        return {}

    def train(
        self, start: torch.Tensor, plan: GroupPlan, data: FederatedData, ctx: GroupContext | None = None
    ) -> GroupOutput:
        slots = plan.idx.shape[0]
        loss_sum = torch.zeros(slots, device=self.device)
        # Step counts and batch sizes are read on the host, once per group, from the plan's host
        # tensors; the indices move once per group to where the data is. A step then starts no
        # transfer and waits for nothing. A batch's real rows are a prefix of its row (see
        # plan.assemble_group), so a slice by a host count selects them.
        steps_host = plan.active.sum(dim=1).to(torch.int64).tolist()
        counts = plan.mask.sum(dim=2).to(torch.int64).tolist()
        idx = plan.idx.to(data.device, non_blocking=True)
        algorithm, ctx = self.algorithm, ctx or GroupContext()
        personal = algorithm.personal if algorithm is not None else None
        correct = algorithm.correct if algorithm is not None and algorithm.corrects else None
        if correct is not None:
            algorithm.prepare(ctx)
        P = self.w.shape[0]
        for i in range(plan.real):
            anchor = start if start.dim() == 1 else start[i]
            mine = ctx.window(i, i + 1)
            if personal is not None:  # the personal model first, on the same batches (Ditto)
                row = ctx.state[personal][i]
                with torch.no_grad():
                    self.w.copy_(torch.where(row[P] > 0, row[:P], anchor))
                self._local_sgd(i, anchor, steps_host[i], counts[i], idx, data, None, algorithm.correct_personal, mine)
                with torch.no_grad():
                    row[:P].copy_(self.w)
                    row[P] = 1.0
            with torch.no_grad():
                self.w.copy_(anchor)
            self._local_sgd(i, anchor, steps_host[i], counts[i], idx, data, loss_sum, correct, mine)
            with torch.no_grad():
                torch.sub(self.w, anchor, out=self.out[i])
        self.out[plan.real : slots].zero_()  # padding slots carry weight 0; keep them finite
        steps = plan.active.sum(dim=1).to(self.device, non_blocking=True)
        samples = plan.mask.sum().to(self.device, non_blocking=True)
        return GroupOutput(delta=self.out[:slots], loss_sum=loss_sum, steps=steps, samples=samples)

    def _local_sgd(self, i, anchor, steps, counts, idx, data, loss_sum, correct, ctx) -> None:
        """Client ``i``'s local steps on ``self.w`` in place (``loss_sum[i]`` collects its losses)."""
        w = self.w.unsqueeze(0)
        one = torch.ones(1, device=self.device)
        if self.buf is not None:
            self.buf.zero_()
        step_correction = None if correct is None else _bound(correct, ctx)
        for t in range(steps):
            rows = idx[i, t, : counts[t]]
            with autocast(self.device, self.precision):
                out = self.model(as_input(gather(data.x_train, rows, self.device)))
            loss = task_loss(out, gather(data.y_train, rows, self.device)).mean()
            self.g.zero_()
            (loss * self.scaler.factor).backward()
            with torch.no_grad():
                a = self.scaler.unscale_and_check(self.g, one)
                sgd_update_(w, self.g, anchor, self.buf, a, self.local, step_correction)
                if loss_sum is not None:
                    loss_sum[i] += loss.detach()


def _bound(correct, ctx: GroupContext, weights_only: bool = False):
    """``correct(g, w, start)`` with the step's context bound (the form :func:`sgd_update_` calls);
    ``weights_only``: ``correct_weights(w, start)`` (the form :func:`sgd_views_update_` calls)."""
    if weights_only:
        return lambda w, start: correct(w, start, ctx)

    def step_correction(g: torch.Tensor, w: torch.Tensor, start: torch.Tensor) -> None:
        correct(g, w, start, ctx)

    return step_correction


def build_trainer(
    spec: Spec, model: nn.Module, device: torch.device, vectorised: bool, notes: list[str] | None = None,
    work_left: Callable[[], float] | None = None,
) -> VectorTrainer | SequentialTrainer:  # fmt: skip
    """A trainer for ``device`` with its own copy of the model template, sized for the largest group
    any round of ``spec`` can have: it steps with the spec's local section as it is, and builds
    the client algorithm with its rate. A vectorised one compiles its step as ``compute.compile``
    says (``notes``: the run's log; ``work_left``: the client-steps left, for ``auto``)."""
    template = copy.deepcopy(model).to(device)
    num_params = sum(p.numel() for p in template.parameters())
    client = spec.algorithm.client
    algorithm = build_algorithm(client.name, client.options, num_params=num_params, device=device, lr=spec.local.lr)
    cls = VectorTrainer if vectorised else SequentialTrainer
    trainer = cls(template, max_slots(spec), spec.local, device, algorithm, spec.compute.precision)
    if vectorised:
        trainer.compiler = StepCompiler(spec.compute.compile, spec, device, trainer._build_step, notes, work_left)
    return trainer
