"""The compiled vectorised step: one compiled graph per window size, kept as AOTInductor packages
in a folder a machine's workers share, what they cost a run, and the fall-back to eager steps.

A window size's step (``vmap(grad(loss))``) is traced once with ``make_fx`` into a plain graph of
ATen operations (its backward included), exported, and compiled by inductor ahead of time into a
package (``torch._inductor.aoti_compile_and_package``): C++ kernels around the matmuls, fused. A
package is a file, ``<cache>/steps/<signature>-<window>.pt2``, which any later process loads in
milliseconds with no tracing and no inductor import: a worker that switches to another experiment
of the same shapes, the next run of a sweep, another worker of the machine. ``torch.compile``
would re-trace every graph in every process (~0.3 s a graph, plus ~2 s to import inductor, on a
2-core CPU) even when its FX graph cache hits. Building a package costs more than a
``torch.compile`` graph (~30 CPU-seconds on that CPU), once per machine and shape.

The packages are keyed by everything a graph depends on (:func:`signature`): the model's spec and
code, the parameter layout, the batch's shapes and types, the precision, the device, the threads
and PyTorch's version. Window sizes are powers of two (:mod:`fedweb_engine.training.vectorise`),
so a run needs at most ``log2(client_group_size) + 1`` packages whatever its cohorts are.
:mod:`fedweb_engine.training.compile_policy` decides under ``compute.compile: auto`` whether a run
compiles at all.
"""

from __future__ import annotations

import getpass
import hashlib
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

BACKEND = "aoti"  # "fx": tests run the traced graph itself (the same graphs, counted, without building packages)
CACHE_FOLDER = "compile-cache"
PACKAGES = "steps"
RECORD = "fedweb-compiled-steps.json"  # per step signature: what building a package cost here
MAX_REASON = 300
_configured: Path | None = None


def default_cache_dir() -> Path | None:
    """``$FEDWEB_DATA_DIR/compile-cache`` when FEDWEB_DATA_DIR is set (a worker, a configured
    CLI), else None: PyTorch's own folder (``/tmp/torchinductor_<user>``)."""
    data = os.environ.get("FEDWEB_DATA_DIR")
    return Path(data) / CACHE_FOLDER if data else None


def use_cache_dir(path: str | Path | None = None) -> Path:
    """Keep compiled steps under ``path`` (default: :func:`default_cache_dir`, else PyTorch's
    folder) for this process, inductor's own caches included; returns the folder. Files are
    renamed into place, so the workers of a machine share it. Environment variables only:
    importing inductor to configure it would cost seconds in every process."""
    global _configured
    path = path or default_cache_dir()
    if path is not None:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(Path(path).resolve())
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "1")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "1")
    _configured = cache_folder()
    return _configured


def use_cache_dir_once() -> Path:
    """The folder set by :func:`use_cache_dir`, setting the default one if nothing did."""
    return _configured or use_cache_dir()


def cache_folder() -> Path:
    """Where inductor keeps its cache in this process (its own rule, without importing it)."""
    folder = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if folder:
        return Path(folder)
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}"
    return Path(tempfile.gettempdir()) / ("torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def package_path(step: str, window: int) -> Path:
    """The package of ``step``'s graph for windows of ``window`` clients (it may not exist yet)."""
    return use_cache_dir_once() / PACKAGES / f"{step}-{window}.pt2"


def compiler_missing(device: torch.device) -> str | None:
    """Why steps cannot be compiled for ``device`` here, or None. Inductor writes C++ (on a CPU,
    and for an AOT package's wrapper on any device) and needs a compiler: the slim Docker image
    has none unless it is installed."""
    if BACKEND != "aoti":
        return None
    names = [os.environ.get("CXX"), "g++", "clang++", "c++"]
    if any(name and shutil.which(name) for name in names):
        return None
    return "no C++ compiler is installed (compiled steps are C++ kernels: install g++)"


@dataclass
class CompileStats:
    """What a trainer's compiled steps cost so far: ``graphs`` window sizes made ready, of which
    ``cache_hits`` were loaded from the machine's cache (the rest built here), in ``seconds`` of
    wall time (tracing, building or loading, and the first step)."""

    graphs: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    failed: str | None = None  # why compiling failed (then the trainer steps eagerly)

    def to_dict(self) -> dict:
        return asdict(self)


class CompiledSteps:
    """A trainer's compiled steps: ``steps(n, *args)`` runs the step for a window of ``n`` clients,
    loading or building its package on first use; None when it cannot compile (the caller then
    steps eagerly, from then on: ``stats.failed`` says why, and a note says so in the run's log)."""

    def __init__(self, build: Callable[[], Callable], device: torch.device, notes: list[str]):
        self.build = build  # a fresh step function (vmap(grad(loss))) to trace
        self.device = device
        self.signature = ""  # set before the first step (see :func:`signature`)
        self.notes = notes
        self.fns: dict[int, Callable] = {}
        self.stats = CompileStats()

    def __call__(self, n: int, *args):
        # A package was built for dense inputs: a no-op for the windows' row blocks, a copy otherwise.
        args = tuple(a.contiguous() for a in args)
        fn = self.fns.get(n)
        return fn(*args) if fn is not None else self._first_call(n, args)

    def _first_call(self, n: int, args: tuple):
        started = time.perf_counter()
        path = package_path(self.signature, n)
        hit = BACKEND == "aoti" and path.is_file()
        try:
            fn = _load(path, self.device) if hit else self._compile(args, path)
            out = fn(*args)
        except torch.OutOfMemoryError:
            raise  # the round's out-of-memory retry handles it (a smaller group), not eager steps
        except Exception as e:  # whatever tracing or compiling a model can raise: eager from now on
            self.stats.failed = _reason(e)
            self.notes.append(f"compute.compile: the vectorised step could not be compiled, training eagerly: "
                              f"{self.stats.failed}")  # fmt: skip
            return None
        seconds = time.perf_counter() - started
        self.fns[n] = fn
        self.stats.graphs += 1
        self.stats.seconds += seconds
        self.stats.cache_hits += hit
        how = "loaded the compiled step from this machine's cache" if hit else "compiled the vectorised step"
        self.notes.append(f"{how} for windows of {n} clients in {seconds:.2f} s; "
                          f"{self.stats.graphs} graphs in {self.stats.seconds:.1f} s so far")  # fmt: skip
        if not hit and BACKEND == "aoti":
            record(self.signature, seconds)
        return out

    def _compile(self, args: tuple, path: Path) -> Callable:
        """Trace the step for ``args`` and build its package at ``path`` (atomically: a worker
        building the same one at the same time writes the same bytes)."""
        from torch.fx.experimental.proxy_tensor import make_fx  # the compiled path's own imports (heavy)

        graph = make_fx(self.build())(*args)
        if BACKEND == "fx":
            return graph
        import torch._inductor

        exported = torch.export.export(graph, args, strict=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.pt2")
        try:
            torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp))
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        return _load(path, self.device)


def _load(path: Path, device: torch.device) -> Callable:
    """A package's runner: the C++ loader itself (no Python import of inductor: milliseconds)."""
    index = device.index if device.type == "cuda" and device.index is not None else -1
    loader = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, index)
    return lambda *args: loader.run(list(args))


def signature(spec_model: dict, model: torch.nn.Module, step_code: tuple, device: torch.device, precision: str,
              x: torch.Tensor, y: torch.Tensor, batch: int) -> str:  # fmt: skip
    """What a compiled step's graph depends on besides the window size: the model's spec section
    and its class's module (the code), its parameter layout, the engine code of the step
    (``step_code``: functions), the samples' shapes and types (``x``/``y``: the training tensors,
    a row a sample), the batch size, the device, the precision, the threads and PyTorch."""
    layout = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    code = [_source(sys.modules.get(type(model).__module__)), *(_source(f) for f in step_code)]
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    parts = [json.dumps(spec_model, sort_keys=True), type(model).__qualname__, layout, code, tuple(x.shape[1:]),
             str(x.dtype), tuple(y.shape[1:]), str(y.dtype), batch, where, precision, torch.get_num_threads(),
             torch.__version__]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:24]


def cached_windows(step: str, windows: list[int]) -> list[int]:
    """Which of ``windows`` have a package for ``step`` on this machine."""
    return [n for n in windows if package_path(step, n).is_file()]


def recorded(step: str) -> float | None:
    """Seconds a package of ``step`` took to build on this machine (the last one), else those of any
    step (the machine's speed), else None."""
    try:
        data = json.loads(_record_path().read_text())
    except (OSError, ValueError):
        return None
    entry = data.get(step) or data.get("last")
    return float(entry) if entry is not None else None


def record(step: str, seconds: float) -> None:
    """Remember what building a package cost (a lost update between two workers only costs the
    next estimate its freshness)."""
    path = _record_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data[step] = data["last"] = round(seconds, 3)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _record_path() -> Path:
    folder = use_cache_dir_once()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / RECORD


def _source(obj) -> str:
    """A hash of ``obj``'s source (a module or a function), or its name when it has none."""
    try:
        text = inspect.getsource(obj)
    except (OSError, TypeError):
        text = repr(obj)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text[:MAX_REASON]}".rstrip(": ")
