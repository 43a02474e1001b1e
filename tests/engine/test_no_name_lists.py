"""No list of component names outside the registry: every list is read from it (issue 9).

Walks every .py/.js/.html file of the repository (outside .venv, tests, migrations, vendored
scripts and the registry itself) and reports a list/tuple/set literal or a dict's keys that hold
two or more registered names of the same kind (AST for Python, a regex over array literals for
JavaScript and templates). One name per spec (a preset, a default) is fine.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from fedweb_engine.components import registry

ROOT = Path(__file__).resolve().parents[2]
SKIP_DIRS = {".venv", "tests", "migrations", "node_modules", ".git", "__pycache__"}
SKIP_FILES = {Path("fedweb_engine/components/registry.py")}
# Lists that are not read from the registry by design, each with why.
ALLOWED = {
    "benchmarks/plain.py": "the hand-written baseline loops implement exactly these algorithms, whatever is registered",
    "benchmarks/runs_table_data.py": "the runs table benchmark's generated population mixes these algorithms on purpose",
    "benchmarks/search.py": "the search benchmark's fixed workloads (client algorithms x datasets), whatever is registered",
}
# Another vocabulary that shares words with component names: training precisions ("fp32", "bf16",
# "fp16") are not codecs. A literal holding one of these marker words lists that vocabulary.
OTHER_VOCABULARIES = {"bf16"}
ARRAY = re.compile(r"\[([^\[\]]*)\]", re.S)
STRING = re.compile(r"""["']([A-Za-z0-9_-]+)["']""")


def _names() -> dict[str, set[str]]:
    return {kind: set(registry.names(kind)) for kind in registry.KINDS}


def _offending(strings: list[str], names: dict[str, set[str]]) -> str | None:
    if OTHER_VOCABULARIES & set(strings):
        return None
    for kind, known in names.items():
        hits = sorted(set(strings) & known)
        if len(hits) >= 2:
            return f"{kind} names {hits}"
    return None


def python_findings(source: str, names: dict[str, set[str]]) -> list[str]:
    """``line: what`` for every literal of Python ``source`` that lists component names."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        strings = [e.value for e in items if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        what = _offending(strings, names)
        if what:
            found.append(f"{node.lineno}: {what}")
    return found


def script_findings(source: str, names: dict[str, set[str]]) -> list[str]:
    """``line: what`` for every array literal of a script or template that lists component names."""
    found = []
    for match in ARRAY.finditer(source):
        what = _offending(STRING.findall(match.group(1)), names)
        if what:
            found.append(f"{source.count(chr(10), 0, match.start()) + 1}: {what}")
    return found


def _files():
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.suffix not in (".py", ".js", ".html") or not path.is_file():
            continue
        if SKIP_DIRS & set(rel.parts) or rel in SKIP_FILES or rel.parts[:2] == ("static", "vendor"):
            continue
        yield rel, path


def test_no_file_lists_two_registered_names_of_a_kind():
    names = _names()
    findings = []
    for rel, path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        found = python_findings(text, names) if path.suffix == ".py" else script_findings(text, names)
        if str(rel) not in ALLOWED:
            findings += [f"{rel}:{f}" for f in found]
    assert findings == []


def test_it_finds_a_tuple_of_strategy_names_and_dict_keys_of_codecs():
    names = _names()
    assert python_findings('ADAPTIVE = ("fedavg", "fedadam")\n', names) == ["1: strategy names ['fedadam', 'fedavg']"]
    assert python_findings('IDS = {"fp32": 1, "topk": 4}\n', names) == ["1: codec names ['fp32', 'topk']"]
    assert python_findings('DEFAULT = {"model": "cnn", "other": "mlp"}\nONE = ["cnn"]\n', names) == []
    assert python_findings('PRECISIONS = ("fp32", "bf16", "fp16")\n', names) == []


def test_it_finds_an_array_of_dataset_names_in_a_script():
    names = _names()
    assert script_findings('const x = 1;\nconst files = ["emnist_h5", "cifar10"];\n', names) == [
        "2: dataset names ['cifar10', 'emnist_h5']"
    ]
    assert script_findings('const one = ["digits"];', names) == []
