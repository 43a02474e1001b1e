"""A helper process that answers the questions needing torch for a process that has not loaded it.

What a spec will cost is measured by building its model on torch's meta device, encoding with its
codecs and describing its dataset: torch work. The web server asks these questions (the capacity
check when a spec is submitted, the new-experiment page's previews) but trains nothing, so it does
not import torch (about a third of its memory and most of its start-up) and asks this helper
instead: one child process, started with ``spawn`` on the first question, that loads the plugins
as every process does, answers one question at a time and exits after ``IDLE_SECONDS`` without one.
A process that has torch already (a worker, the engine's command line, the tests) answers in
process: a second interpreter would only add its start-up.

A question that outlives ``TIMEOUT_SECONDS`` (a plugin loader that hangs) kills the helper and
raises :class:`HelperFailed`, as does a helper that dies; the next question starts a new one.
What the answer raises (a ``SpecError`` naming the field) is raised in the caller as it was.
"""

from __future__ import annotations

import importlib
import multiprocessing
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from fedweb_engine.components.plugins import load_plugins
from fedweb_engine.spec.validation import SpecError

IDLE_SECONDS = 300.0
TIMEOUT_SECONDS = 180.0  # a first answer includes the helper's start-up (importing torch: seconds on a busy host)
ANSWERS = "fedweb_engine.estimates.answers"


class HelperFailed(RuntimeError):
    """The helper died, or did not answer in time."""


def ask(question: str, *args: Any) -> Any:
    """The answer to ``question`` (a function of :mod:`fedweb_engine.estimates.answers`) for ``args``."""
    if "torch" in sys.modules:
        return getattr(importlib.import_module(ANSWERS), question)(*args)
    return _helper.ask(question, args)


class Helper:
    """The child process, started when first asked and stopped when idle (thread-safe)."""

    def __init__(
        self, idle_seconds: float = IDLE_SECONDS, timeout_seconds: float = TIMEOUT_SECONDS, answers: str = ANSWERS
    ):
        self.idle_seconds, self.timeout_seconds, self.answers = idle_seconds, timeout_seconds, answers
        self._lock = threading.Lock()  # one question at a time: the child answers in order
        self._process: multiprocessing.process.BaseProcess | None = None
        self._pipe: Connection | None = None
        self._last = 0.0
        self._watcher: threading.Thread | None = None
        self.started = 0  # helper processes started so far (tests read it)

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.is_alive() else None

    def ask(self, question: str, args: tuple) -> Any:
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            try:
                self._pipe.send((question, args))
                if not self._pipe.poll(self.timeout_seconds):
                    self._stop()
                    raise HelperFailed(
                        f"the estimates helper did not answer {question} in {self.timeout_seconds:.0f} s"
                    )
                ok, value = self._pipe.recv()
            except (EOFError, OSError, BrokenPipeError) as e:
                if self._process is not None:
                    self._process.join(5)  # reaped, so its exit code is known
                code = self._process.exitcode if self._process is not None else None
                self._stop()
                raise HelperFailed(f"the estimates helper died answering {question} (exit code {code})") from e
            finally:
                self._last = time.monotonic()
        if ok:
            return value
        raise value

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> None:
        self._stop()
        context = multiprocessing.get_context("spawn")  # never fork a process that serves requests
        parent, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.answers), name="fedweb-estimates", daemon=True)
        self._process.start()
        child.close()
        self._pipe = parent
        self.started += 1
        if self._watcher is None or not self._watcher.is_alive():
            self._watcher = threading.Thread(target=self._stop_when_idle, name="fedweb-estimates-idle", daemon=True)
            self._watcher.start()

    def _stop(self) -> None:
        process, pipe = self._process, self._pipe
        self._process = self._pipe = None
        if pipe is not None:
            pipe.close()
        if process is not None and process.is_alive():
            process.kill()
            process.join(5)

    def _stop_when_idle(self) -> None:
        while True:
            time.sleep(min(self.idle_seconds, 5.0))
            with self._lock:
                if self._process is None:
                    return
                if time.monotonic() - self._last >= self.idle_seconds:
                    self._stop()
                    return


def _serve(pipe: Connection, module: str) -> None:
    """The helper's loop: load the plugins, then answer from ``module`` until the parent hangs up."""
    load_plugins()
    answers = importlib.import_module(module)
    while True:
        try:
            question, args = pipe.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, getattr(answers, question)(*args))
        except Exception as e:  # the caller raises it: a SpecError names the field
            reply = (False, _portable(e))
        try:
            pipe.send(reply)
        except Exception:  # an exception that does not pickle: its type and message still travel
            pipe.send((False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}")))


def _portable(error: Exception) -> Exception:
    """``error`` as it can be raised in a process without torch: a SpecError or a builtin exception
    as it is; any other (a torch or plugin exception, whose class the caller would have to import)
    as a RuntimeError that keeps its type's name and message."""
    if isinstance(error, SpecError) or type(error).__module__ == "builtins":
        return error
    return RuntimeError(f"{type(error).__name__}: {error}")


_helper = Helper()
