"""What a component of each kind must look like, checked when it registers.

As pluggy's ``_verify_hook`` checks a hook implementation against its spec, the registry checks a
component against its kind's contract: the factory must accept the call the engine makes, and
what it builds must have the methods the engine calls, each accepting the engine's arguments. A
mismatch is a :class:`ContractError` naming the plugin, the component and the method, raised while
the plugin is imported, so the process stops at start-up instead of failing in a round.

The protocols below are the public contract of each kind (docs/plugins.md). What a factory builds
is checked at registration when the factory is a class, or a function whose return annotation
names one; otherwise when it is first built (``check_built``), with the same message.
Plain Python: no torch here (the web process reads the registry without it).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from torch import Tensor


class RegistryError(ValueError):
    """A registration that cannot be accepted (a duplicate name, options that are not a frozen
    dataclass, a contract not kept); :mod:`~fedweb_engine.components.registry` re-exports it."""


class ContractError(RegistryError):
    """A component that does not fit its kind's contract (the message names the plugin and the method)."""


# -- the protocols ------------------------------------------------------------------------------


class StreamingStrategy(Protocol):
    """A server strategy that steps on the round's weighted-average update Δ̄ (memory stays flat
    however many clients report: their updates are summed as they arrive). Register it with
    ``@registry.strategy(name)``; ``fedweb_engine.strategies.FedAvg`` is the base to subclass."""

    def step(self, global_flat: Tensor, avg_update: Tensor) -> None:
        """Update ``global_flat`` [P] in place from ``avg_update`` [P]."""

    def state_dict(self) -> dict[str, Tensor]:
        """Every state buffer by name (checkpoints carry them)."""

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Copy ``state`` back into the buffers."""


class CohortStrategy(Protocol):
    """A server strategy that steps on every aggregated client's update at once (robust rules).
    Register it with ``@registry.strategy(name, needs_updates=True)``;
    ``fedweb_engine.strategies.robust.RobustStrategy`` is the base to subclass."""

    def step(self, global_flat: Tensor, updates: Tensor, weights: Tensor) -> None:
        """Update ``global_flat`` [P] in place from ``updates`` [n, P] (each client's decoded update)
        and ``weights`` [n] (their sample counts)."""

    def state_dict(self) -> dict[str, Tensor]:
        """Every state buffer by name (checkpoints carry them)."""

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Copy ``state`` back into the buffers."""


class ClientAlgorithmHooks(Protocol):
    """The hooks of a client algorithm (``fedweb_engine.algorithms.ClientAlgorithm``, whose
    docstrings say what each does); a subclass overrides some of them and must keep their arguments."""

    def client_state(self) -> dict[str, int]: ...
    def server_state(self) -> dict[str, Tensor]: ...
    def prepare(self, ctx: Any) -> None: ...
    def correct(self, g: Tensor, w: Tensor, start: Tensor, ctx: Any) -> None: ...
    def correct_weights(self, w: Tensor, start: Tensor, ctx: Any) -> None: ...
    def correct_personal(self, g: Tensor, w: Tensor, start: Tensor, ctx: Any) -> None: ...
    def finish(self, delta: Tensor, steps: Tensor, ctx: Any) -> dict[str, Tensor]: ...
    def fold(
        self, server: dict[str, Tensor], avg_update: Tensor | None, sums: Mapping, reported: Tensor, num_clients: int
    ) -> None: ...


class CodecProtocol(Protocol):
    """What the engine calls on a codec (``fedweb_engine.communication.codecs.Codec`` implements
    the wire format; a plugin's codec subclasses it and fills in the data part)."""

    def payload_bytes(self) -> int: ...
    def encode(self, x: Tensor, *, out: Tensor | None = None) -> Tensor: ...
    def decode(self, payload: Tensor, *, check: bool = True, out: Tensor | None = None) -> Tensor: ...


# -- each kind's contract -----------------------------------------------------------------------


@dataclass(frozen=True)
class Contract:
    """How the engine calls a kind's factory, and the protocol of what it builds (None: not checked
    by methods here; models are checked to be ``nn.Module``s and datasets to return a ``Pool`` when built)."""

    args: tuple[str, ...] = ()  # passed by position, in this order
    keywords: tuple[str, ...] = ()  # passed by name
    product: type | None = None


_STRATEGY_CALL = ("num_params", "device", "lr", "options")


def contract(kind: str, traits: Mapping[str, Any]) -> Contract:
    """The contract of a component of ``kind`` registered with ``traits``."""
    if kind == "model":
        return Contract(args=("input_shape", "num_classes", "options"))
    if kind == "dataset":
        return Contract(args=("options", "rng", "context") if traits.get("context") else ("options", "rng"))
    if kind == "strategy":
        return Contract(keywords=_STRATEGY_CALL, product=strategy_protocol(traits))
    if kind == "algorithm":
        return Contract(keywords=_STRATEGY_CALL, product=ClientAlgorithmHooks)
    if kind == "codec":
        return Contract(args=("layout", "options"), product=CodecProtocol)
    raise ValueError(f"no contract for kind {kind!r}")


def strategy_protocol(traits: Mapping[str, Any]) -> type:
    """The protocol a strategy registered with ``traits`` implements: ``needs_updates`` says which."""
    return CohortStrategy if traits.get("needs_updates") else StreamingStrategy


# -- the checks ---------------------------------------------------------------------------------


def check_factory(who: str, factory: Callable, kind: str, traits: Mapping[str, Any]) -> None:
    """Check ``factory`` (registered by ``who``, e.g. "plugin 'x': strategy 'y'") against its kind's
    contract: its own call, ``describe``'s for a dataset, and what it builds when that is known now."""
    terms = contract(kind, traits)
    _check_call(f"{who}: its factory {_name(factory)}", factory, terms.args, terms.keywords)
    describe = traits.get("describe")
    if kind == "dataset" and callable(describe):  # a reference is checked when it is imported
        check_describe(who, describe, traits)
    product = _declared_product(factory)
    if terms.product is not None and product is not None:
        check_methods(who, product, terms.product)


def check_describe(who: str, describe: Callable, traits: Mapping[str, Any]) -> None:
    """A dataset's ``describe`` takes its options (and the context, like the loader, with ``context=True``)."""
    _check_call(
        f"{who}: describe {_name(describe)}", describe, ("options", "context")[: 1 + bool(traits.get("context"))], ()
    )


def check_built(who: str, built: Any, kind: str, traits: Mapping[str, Any]) -> None:
    """Check what a factory built against its kind's protocol (for factories whose product was not
    known when they registered); once per type."""
    product = contract(kind, traits).product
    key = (who, type(built), product)
    if product is None or key in _checked:
        return
    check_methods(who, type(built), product)
    _checked.add(key)


_checked: set[tuple[str, type, type]] = set()


def check_methods(who: str, implementation: type, protocol: type) -> None:
    """Each method of ``protocol`` must exist on ``implementation`` and accept the engine's call."""
    for name, spec in _protocol_methods(protocol):
        method = inspect.getattr_static(implementation, name, None)
        if method is None:
            raise ContractError(
                f"{who}: {implementation.__name__} has no method {name}{_shown(spec)} ({protocol.__name__})"
            )
        bound = getattr(implementation, name)
        if not callable(bound):
            raise ContractError(f"{who}: {implementation.__name__}.{name} is not a method ({protocol.__name__}.{name})")
        params = [p for p in spec.parameters.values() if p.name != "self"]
        args = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
        keywords = tuple(p.name for p in params if p.kind is p.KEYWORD_ONLY)
        receiver = () if isinstance(method, staticmethod | classmethod) else ("self",)
        where = f"{who}: method {implementation.__name__}.{name}"
        _check_call(where, bound, receiver + args, keywords, expected=f"{protocol.__name__}.{name}{_shown(spec)}")


def _check_call(
    where: str, fn: Callable, args: tuple[str, ...], keywords: tuple[str, ...], expected: str | None = None
) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return
    try:
        signature.bind(*args, **{k: k for k in keywords})
    except TypeError as e:
        call = ", ".join([*args, *(f"{k}=…" for k in keywords)])
        wanted = expected or f"the engine's call ({call})"
        raise ContractError(f"{where}{_plain(signature)} does not fit {wanted}: {e}") from None


def _protocol_methods(protocol: type) -> list[tuple[str, inspect.Signature]]:
    own = [name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")]
    return [(name, inspect.signature(vars(protocol)[name])) for name in own]


def _shown(spec: inspect.Signature) -> str:
    """A protocol method's parameters as the engine passes them (no ``self``, no annotations)."""
    return _plain(spec.replace(parameters=[p for p in spec.parameters.values() if p.name != "self"]))


def _plain(signature: inspect.Signature) -> str:
    params = [p.replace(annotation=p.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=params, return_annotation=signature.empty))


def _declared_product(factory: Callable) -> type | None:
    """The class a factory builds, when it says so: the factory itself if it is a class, else its
    return annotation when that resolves to a class (None otherwise: checked when built)."""
    if isinstance(factory, type):
        return factory
    try:
        hints = typing.get_type_hints(factory)
    except Exception:  # an annotation naming what is imported only for type checkers
        return None
    returned = hints.get("return")
    return returned if isinstance(returned, type) else None


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
