"""Follows one local learning rate through the code: which project files hand it on, and which way.

A function is handed the rate when one of its arguments carries it: the number itself, the spec's
``local`` section holding it, a ``Spec`` or a spec dict holding that. Its file then takes the value
from its caller's file (a call, caller -> callee); a function that returns a carrier hands it back
(callee -> caller). The walk (docs/development.md, "Where things go") is every file on a chain of such hand-offs
from the form to where the experiment is stored, and from where the worker loads it to the step.
An object that keeps the rate in an attribute (the form, a trainer) is not a carrier: a file that
only handles the form, or calls a trainer, does not handle the rate.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from fedweb_engine.spec.schema import LocalSpec, Spec

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tuple(f"{ROOT / package}/" for package in ("fedweb", "fedweb_engine", "orchestrator", "accounts", "workers"))


def _project_file(code) -> str | None:
    name = code.co_filename
    return str(Path(name).relative_to(ROOT)) if name.startswith(PROJECT) else None


class RateWalk:
    """Records the hand-offs of the rate ``lr`` while :meth:`following` (this thread only)."""

    def __init__(self, lr: float):
        self.lr = lr
        self.calls: dict[str, set[str]] = defaultdict(set)  # caller file -> callee files
        self.returns: dict[str, set[str]] = defaultdict(set)  # callee file -> caller files
        self.order: list[str] = []  # files in the order the rate first reaches them

    def carries(self, value) -> bool:
        if type(value) is float:
            return value == self.lr
        if isinstance(value, LocalSpec):
            return value.lr == self.lr
        if isinstance(value, Spec):
            return value.local.lr == self.lr
        if type(value) is dict:
            local = value.get("local")
            return value.get("lr") == self.lr or (type(local) is dict and local.get("lr") == self.lr)
        return False

    @staticmethod
    def _caller(frame) -> str | None:
        frame = frame.f_back
        while frame is not None:
            name = _project_file(frame.f_code)
            if name is not None:
                return name
            frame = frame.f_back
        return None

    def _hand(self, edges: dict[str, set[str]], src: str | None, dst: str | None) -> None:
        if src is None or dst is None:
            return
        self.order.extend(name for name in (src, dst) if name not in self.order)
        if src != dst:
            edges[src].add(dst)

    def _profile(self, frame, event, arg) -> None:
        here = _project_file(frame.f_code)
        if here is None:
            return
        if event == "call":
            code = frame.f_code
            names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
            if any(self.carries(frame.f_locals.get(name)) for name in names):
                self._hand(self.calls, self._caller(frame), here)
        elif event == "return" and self.carries(arg):
            self._hand(self.returns, here, self._caller(frame))

    @contextmanager
    def following(self):
        previous = sys.getprofile()
        sys.setprofile(self._profile)
        try:
            yield self
        finally:
            sys.setprofile(previous)

    def files_between(self, start: str, end: str, max_depth: int = 8) -> list[str]:
        """Every file on a chain of hand-offs from ``start`` to ``end``, in the order the rate met them.

        A chain returns only to the file that called (or, once back above ``start``, to whoever
        called ``start``): a file that merely asked ``spec.py`` for something (``to_dict``) is not
        on the way from ``spec.py``'s other callers. A state is a file and the files that called
        into it (at most ``max_depth``); the chains are the states reached from ``start`` that
        reach ``end``.
        """
        first = (start, ())
        successors: dict[tuple, set[tuple]] = defaultdict(set)
        reached, todo = {first}, [first]
        while todo:
            state = todo.pop()
            here, stack = state
            moves = [(b, (*stack, here)) for b in self.calls.get(here, ()) if len(stack) < max_depth]
            moves += [(b, stack[:-1]) for b in self.returns.get(here, ()) if not stack or stack[-1] == b]
            for move in moves:
                successors[state].add(move)
                if move not in reached:
                    reached.add(move)
                    todo.append(move)
        predecessors: dict[tuple, set[tuple]] = defaultdict(set)
        for state, moves in successors.items():
            for move in moves:
                predecessors[move].add(state)
        arrive = [state for state in reached if state[0] == end]
        leads, todo = set(arrive), list(arrive)
        while todo:
            for state in predecessors[todo.pop()]:
                if state not in leads:
                    leads.add(state)
                    todo.append(state)
        on_chain = {here for here, _ in leads}
        return [name for name in self.order if name in on_chain]
