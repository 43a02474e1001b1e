"""``pip install ./fedweb_engine`` gives a researcher the simulator with no web service: into a fresh
virtual environment without Django, pip installs the engine against its declared dependencies,
and ``from fedweb_engine import Simulation`` runs a spec there.

A real download of torch, scikit-learn and the rest would cost minutes per run (145 s on the 2-core
VM, torch from the local CPU wheel), so the fresh environment sees only the distributions the
engine's pyproject.toml declares, and what they require in turn, from this environment (a ``.pth``
file pointing at links to them, nothing else): pip, run with ``--no-index``, must find each
requirement satisfied there, so a dependency the engine imports but does not declare fails the
import, and one it declares that nothing provides fails the install.
"""

from __future__ import annotations

import importlib.metadata
import json
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from tests.live import ROOT

pytestmark = pytest.mark.slow

ENGINE = ROOT / "fedweb_engine"

USE = r"""
import importlib, json, pkgutil, sys
from fedweb_engine import Simulation, Spec
import fedweb_engine

spec = Spec.from_dict({"rounds": 2, "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 6},
                       "model": {"name": "logistic"}, "participation": {"clients_per_round": 3},
                       "compute": {"device": "cpu"}})
results = Simulation(spec).run()
modules = [m.name for m in pkgutil.walk_packages(fedweb_engine.__path__, "fedweb_engine.")]
for name in modules:
    importlib.import_module(name)
print(json.dumps({"file": fedweb_engine.__file__, "rounds": [r.round for r in results],
                  "accuracy": results[-1].test_accuracy, "modules": len(modules),
                  "django": importlib.util.find_spec("django") is not None,
                  "web": sorted(m for m in sys.modules if m.split(".")[0] in ("django", "celery", "channels"))}))
"""


def _closure(requirements: list[str]) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions that satisfy ``requirements``, and theirs, recursively (extras left out)."""
    env = default_environment()
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        key = req.name.lower().replace("_", "-")
        if key in found:
            continue
        dist = importlib.metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), f"{req} is not met here by {dist.version}"
        found[key] = dist
        todo.extend(Requirement(r) for r in dist.requires or [])
    return found


def _link_tops(dists, site: Path) -> None:
    """Symlink each distribution's top-level files and folders (its packages, libs, dist-info) into ``site``."""
    for dist in dists:
        base = Path(dist.locate_file(""))
        for top in {f.parts[0] for f in dist.files or [] if f.parts and f.parts[0] != ".."}:
            if top != "__pycache__" and not (site / top).exists() and (base / top).exists():
                (site / top).symlink_to(base / top)


def test_pip_installs_the_engine_alone_into_a_fresh_environment_and_a_spec_runs_there(tmp_path):
    declared = tomllib.loads((ENGINE / "pyproject.toml").read_text())
    deps = declared["project"]["dependencies"]
    assert {Requirement(d).name for d in deps} <= {
        "torch", "numpy", "scikit-learn", "safetensors", "h5py", "tqdm", "psutil", "nvidia-ml-py",
    }  # fmt: skip
    closure = _closure(deps)
    assert "django" not in closure
    site = tmp_path / "deps"
    site.mkdir()
    _link_tops([*closure.values(), *_closure(declared["build-system"]["requires"]).values()], site)

    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    (Path(purelib) / "engine_dependencies.pth").write_text(f"{site}\n")
    source = tmp_path / "src" / "fedweb_engine"  # a copy: setuptools writes build/ and egg-info beside it
    shutil.copytree(ENGINE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))

    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--no-build-isolation",
               "--disable-pip-version-check", str(source)]  # fmt: skip
    done = subprocess.run(install, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Successfully installed fedweb-engine-0.1.0" in done.stdout

    used = subprocess.run([python, "-c", USE], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert used.returncode == 0, used.stderr[-3000:]
    out = json.loads(used.stdout.strip().splitlines()[-1])
    assert out["file"].startswith(purelib)  # the installed copy, not this checkout
    assert out["rounds"] == [1, 2] and 0 < out["accuracy"] <= 1
    assert "2/2" in used.stderr  # run()'s progress bar
    assert out["django"] is False and out["web"] == []
    in_tree = [m.name for m in pkgutil.walk_packages([str(ENGINE)], "fedweb_engine.")]
    assert out["modules"] == len(in_tree) > 90  # every subpackage is listed in pyproject.toml
