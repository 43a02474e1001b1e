"""The compiled vectorised step: one ``torch.compile`` graph per window size, the persistent cache
they are kept in, what they cost a run, and the fall-back to eager steps when they cannot compile.

Window sizes are powers of two (see :mod:`fedweb_engine.training.vectorise`), so a run compiles at
most ``log2(client_group_size) + 1`` graphs whatever its cohorts are. Each graph is traced from
its own copy of the step's code object: dynamo keeps compiled graphs (and its recompile limit)
per code object, so a shared one would let a worker's second experiment silently fall back to
eager once eight graphs exist in the process, and would keep every finished run's graphs alive.
With one code object per graph they go when the trainer goes.

The compiled artefacts (inductor's FX graph cache and AOTAutograd's cache) live in one folder per
machine, ``$FEDWEB_DATA_DIR/compile-cache``: every worker of the machine (and the next run of
the same shapes) loads a graph from it instead of compiling it again (about 0.3 s a graph
against tens of seconds on a 2-core CPU). :mod:`fedweb_engine.training.compile_policy` decides
under ``compute.compile: auto`` whether a run compiles at all.
"""

from __future__ import annotations

import getpass
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import time
import types
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

BACKEND = "inductor"  # tests use "eager": dynamo's graphs and counters, without inductor's compilation
CACHE_FOLDER = "compile-cache"
RECORD = "fedweb-compiled-steps.json"  # per step signature: what its last compilation cost
MAX_REASON = 300
_ids = itertools.count()
_configured: Path | None = None


def default_cache_dir() -> Path | None:
    """``$FEDWEB_DATA_DIR/compile-cache`` when FEDWEB_DATA_DIR is set (a worker, a configured
    CLI), else None: PyTorch's own folder (``/tmp/torchinductor_<user>``)."""
    data = os.environ.get("FEDWEB_DATA_DIR")
    return Path(data) / CACHE_FOLDER if data else None


def use_cache_dir(path: str | Path | None = None) -> Path:
    """Keep compiled graphs under ``path`` (default: :func:`default_cache_dir`, else PyTorch's
    folder) for this process, before its first compilation; returns the folder. Writes there are
    atomic (a file is renamed into place), so the workers of a machine share it. Environment
    variables only: importing inductor to configure it would cost seconds in every process."""
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


def compiler_missing(device: torch.device) -> str | None:
    """Why ``torch.compile`` cannot build kernels for ``device`` here, or None. On a CPU inductor
    writes C++ and needs a compiler (the slim Docker image has none unless it is installed)."""
    if device.type != "cpu" or BACKEND != "inductor":
        return None
    names = [os.environ.get("CXX"), "g++", "clang++", "c++"]
    if any(name and shutil.which(name) for name in names):
        return None
    return "no C++ compiler is installed (torch.compile writes C++ kernels on a CPU: install g++)"


@dataclass
class CompileStats:
    """What a trainer's compiled steps cost so far (``seconds``: wall time of the calls that
    compiled or loaded a graph, tracing included)."""

    graphs: int = 0
    seconds: float = 0.0
    cache_hits: int = 0
    failed: str | None = None  # why compiling failed (then the trainer steps eagerly)

    def to_dict(self) -> dict:
        return asdict(self)


class CompiledSteps:
    """A trainer's compiled steps: ``steps(n, *args)`` runs the step for a window of ``n`` clients,
    compiling its graph on first use; None when it cannot compile (the caller then steps eagerly,
    from then on: ``stats.failed`` says why, and a note says so in the run's log)."""

    def __init__(self, build: Callable[[], Callable], signature: str, notes: list[str]):
        self.build = build  # a fresh step function (vmap(grad(loss))) for a new graph
        self.signature = signature  # what makes two runs' graphs the same (see :func:`signature`)
        self.notes = notes
        self.fns: dict[int, Callable] = {}
        self.stats = CompileStats()

    def __call__(self, n: int, *args):
        fn = self.fns.get(n)
        if fn is not None:
            return fn(*args)
        return self._first_call(n, args)

    def _first_call(self, n: int, args: tuple):
        from torch._dynamo.utils import counters  # the compiled path's own import (heavy)

        use_cache_dir_once()
        fn = torch.compile(_own_code(self.build()), backend=BACKEND, fullgraph=True, dynamic=False)
        graphs, hits = counters["stats"]["unique_graphs"], _cache_hits(counters)
        started = time.perf_counter()
        try:
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
        self.stats.graphs += counters["stats"]["unique_graphs"] - graphs
        self.stats.seconds += seconds
        hit = _cache_hits(counters) > hits  # AOTAutograd's hit may count inductor's too: one graph
        self.stats.cache_hits += hit
        self.notes.append(
            f"compiled the vectorised step for windows of {n} clients in {seconds:.1f} s"
            + (" (from this machine's compile cache)" if hit else "")
            + f"; {self.stats.graphs} graphs in {self.stats.seconds:.1f} s so far"
        )
        record(self.signature, seconds, from_cache=hit)
        return out


def signature(
    model: torch.nn.Module, device: torch.device, precision: str, x: torch.Tensor, y: torch.Tensor, batch: int
) -> str:
    """What a compiled step's graph depends on besides the window size: the model's class and
    parameter layout, the samples' shapes and types (``x``/``y``: the training tensors, one row a
    sample), the batch size, the device kind, the precision and PyTorch's version."""
    layout = [(name, tuple(p.shape)) for name, p in model.named_parameters()]
    parts = [type(model).__qualname__, layout, tuple(x.shape[1:]), str(x.dtype), tuple(y.shape[1:]), str(y.dtype),
             batch, device.type, precision, torch.__version__]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:20]


def recorded(step: str) -> dict | None:
    """The last compilation of ``step`` on this machine (its seconds per graph, whether it came
    from the cache), or None: never compiled with this cache folder."""
    try:
        return json.loads(_record_path().read_text()).get(step)
    except (OSError, ValueError):
        return None


def record(step: str, seconds: float, *, from_cache: bool) -> None:
    """Remember what a graph of ``step`` cost; a lost update between two workers only costs the
    next estimate its freshness."""
    path = _record_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    entry = data.get(step, {})
    entry["warm_seconds" if from_cache else "cold_seconds"] = round(seconds, 3)
    data[step] = entry
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _record_path() -> Path:
    folder = use_cache_dir_once()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / RECORD


def _cache_hits(counters) -> int:
    return counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"]["autograd_cache_hit"]


def _own_code(fn: Callable) -> Callable:
    """``fn`` called through a wrapper with a code object of its own (see the module's docstring)."""

    def step(*args):
        return fn(*args)

    code = step.__code__.replace(co_name=f"fedweb_step_{next(_ids)}")
    return types.FunctionType(code, step.__globals__, code.co_name, step.__defaults__, step.__closure__)


def _reason(e: Exception) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text[:MAX_REASON]}".rstrip(": ")
