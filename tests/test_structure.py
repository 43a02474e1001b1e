"""The folder tree says what the code is: one name for one concept, small folders, and comments
that say why, never when.

- No two app modules (or packages) share a base name, unless Django or Python fixes the name
  (``__init__``, ``__main__``, ``apps``, ``admin``, ``urls``, ``views``, ``models``, ``migrations``)
  or they are one concept's faces, listed in ``FACES`` with the reason: ``privacy.py`` twice would
  mean two concepts under one name, or one concept in two places.
- No folder holds more than ``MAX_MODULES`` Python modules: a bigger one is split by role.
- No comment or docstring of the app names an issue ("issue 17", "(issue 20)"): the why stays in
  the code, the when is in git.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("fedweb", "fedweb_engine", "orchestrator", "accounts", "workers")
MAX_MODULES = 12
FIXED_NAMES = {"__init__", "__main__", "apps", "admin", "urls", "views", "models", "migrations"}
# Base name -> (every module or package that has it, why they are one concept).
FACES: dict[str, tuple[set[str], str]] = {
    "experiments": (
        {"orchestrator/experiments/", "orchestrator/api/experiments.py"},
        "experiments in the domain, and their REST API",
    ),
    "sweeps": (
        {
            "orchestrator/sweeps/",
            "orchestrator/api/sweeps.py",
            "orchestrator/web/views/sweeps.py",
            "orchestrator/sockets/sweeps.py",
            "orchestrator/templatetags/sweeps.py",
        },
        "a sweep in the domain, and its API, pages, socket and template filters",
    ),  # fmt: skip
    "external": (
        {"orchestrator/external/", "orchestrator/api/external/"},
        "external runs in the domain (models, ingestion, liveness), and their API (ingestion, MLflow)",
    ),
    "runs": (
        {"orchestrator/runs/", "orchestrator/api/runs.py", "orchestrator/web/views/runs.py"},
        "the runs table: its query language and saved views in the domain, its API, and its page",
    ),
    "forms": (
        {"accounts/web/forms.py", "orchestrator/web/forms/"},
        "each app's page forms, as Django's convention names them (accounts' team pages, orchestrator's)",
    ),
    "estimates": (
        {"fedweb_engine/estimates/", "orchestrator/web/estimates.py"},
        "what a spec will cost: computed by the engine (in its helper process), shown by the new-experiment page",
    ),
    "workers": (
        {"workers/", "orchestrator/fleet/workers.py", "orchestrator/web/views/workers.py"},
        "a worker: its process (the glue), its row and queues in the fleet, and the Workers page",
    ),
    "web": ({"orchestrator/web/", "accounts/web/"}, "each Django app's pages"),
    "fedavg": (
        {"fedweb_engine/algorithms/fedavg.py", "fedweb_engine/strategies/fedavg.py"},
        "FedAvg's client side (a client algorithm) and server side (a strategy)",
    ),
    "components": (
        {"fedweb_engine/components/", "fedweb_engine/spec/components.py"},
        "the components (registry, plugins, built-ins) and the part of a spec that names them",
    ),
}
ISSUE = re.compile(r"\bissues? ?#?\d+|\(#\d+\)", re.IGNORECASE)


def app_files() -> list[Path]:
    """Every Python file of the app's packages, migrations aside."""
    return [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "migrations" not in p.parts]


def base_names(files: list[Path]) -> dict[str, set[str]]:
    """Base name -> the modules (``a/b.py``) and packages (``a/b/``) that have it."""
    names: dict[str, set[str]] = defaultdict(set)
    for path in files:
        rel = path.relative_to(ROOT)
        if path.name == "__init__.py":
            names[rel.parent.name].add(f"{rel.parent}/")
        names[path.stem].add(str(rel))
    return names


def twins(files: list[Path], faces: dict[str, tuple[set[str], str]] = FACES) -> list[str]:
    """Base names shared by modules that are not one concept's listed faces; and listed faces the
    tree no longer has as listed (a face gone or added: the list says why, so it must be exact)."""
    problems = []
    for name, where in sorted(base_names(files).items()):
        if name in FIXED_NAMES or (len(where) == 1 and name not in faces):
            continue
        if name not in faces:
            problems.append(f"{name}: {sorted(where)} share a base name (rename for what each holds, or list faces)")
        elif faces[name][0] != where:
            problems.append(f"{name}: FACES lists {sorted(faces[name][0])}, the tree has {sorted(where)}")
    problems += [f"{name}: listed in FACES, found nowhere" for name in faces if name not in base_names(files)]
    return problems


def crowded_folders(files: list[Path], limit: int = MAX_MODULES) -> list[str]:
    counts: dict[Path, int] = defaultdict(int)
    for path in files:
        counts[path.parent] += 1
    return [f"{folder.relative_to(ROOT)} holds {n} modules" for folder, n in sorted(counts.items()) if n > limit]


def history_comments(texts: dict[str, str]) -> list[str]:
    """``file:line: text`` for every line of ``texts`` (file -> content) that names an issue."""
    return [
        f"{name}:{number}: {line.strip()}"
        for name, text in texts.items()
        for number, line in enumerate(text.splitlines(), start=1)
        if ISSUE.search(line)
    ]


def _app_texts() -> dict[str, str]:
    """The app's code, scripts and templates: Python, the pages' own JS (not vendored libraries), HTML."""
    files = [*app_files(), *(ROOT / "static" / "js").glob("*.js"), *(ROOT / "templates").rglob("*.html")]
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files}


def test_no_two_app_modules_share_a_base_name_unless_they_are_one_concept_s_faces():
    assert twins(app_files()) == []


def test_no_folder_holds_more_than_twelve_modules():
    assert crowded_folders(app_files()) == []


def test_no_comment_in_the_app_names_an_issue():
    assert history_comments(_app_texts()) == []


def test_the_checks_fail_on_a_tampered_tree():
    files = app_files()
    # workers/privacy.py beside the engine's privacy/ package: two concepts, one name.
    assert twins([*files, ROOT / "workers" / "privacy.py"]) == [
        "privacy: ['fedweb_engine/privacy/', 'workers/privacy.py'] share a base name "
        "(rename for what each holds, or list faces)"
    ]
    # A face that goes away, and one more module under a listed name, both ask for the list.
    faces = {**FACES, "web": ({"orchestrator/web/", "accounts/web/", "workers/web/"}, "pages")}
    assert any(p.startswith("web: FACES lists") for p in twins(files, faces))
    assert twins([*files, ROOT / "orchestrator" / "fleet" / "sweeps.py"])[0].startswith("sweeps: FACES lists")
    # A thirteenth module in a folder.
    in_workers = sum(1 for p in files if p.parent == ROOT / "workers")
    crowded = [*files, *(ROOT / "workers" / f"extra_{i}.py" for i in range(MAX_MODULES + 1 - in_workers))]
    assert crowded_folders(crowded) == [f"workers holds {MAX_MODULES + 1} modules"]
    assert crowded_folders(files, limit=3)  # a lower limit finds folders over it
    texts = {"a.py": "x = 1\n# tried a queue here (issue 20)\n", "b.js": "// see #12 and Issue #7\n", "c.py": "# ok\n"}
    assert history_comments(texts) == ["a.py:2: # tried a queue here (issue 20)", "b.js:1: // see #12 and Issue #7"]
