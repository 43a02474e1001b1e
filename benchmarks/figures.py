"""Every figure quoted in the docs comes from a results file: the check behind ``tests/benchmarks/test_figures.py``.

The rule (documented in ``benchmarks/README.md``, *Quoting a figure*):

1. A **block** is a paragraph, a list item or a table row of ``README.md``, ``benchmarks/README.md`` or
   ``docs/*.md`` (code blocks and inline code are not text).
2. A block **names** a results file when it contains ``benchmarks/results/<file>`` or ``results/<file>``
   (``.json``, or a ``.md`` table generated from a JSON). A table row also counts the files named in its
   own table's header row or in the paragraph just before the table.
3. A **figure** is a number with a decimal point, or a number with a unit: ``×``/``x`` (a ratio, not
   ``28×28``), ``%``, ``MB``, ``GB``, ``GiB``, ``s``, ``ms``, ``clients/s``, ``samples/s``, ``s/round``,
   ``MB/round``, ``TFLOP/s``. Dates, versions in inline code and numbers right after ``≤ ≥ < >`` (bounds
   and targets, not measurements) are not figures.
4. In a block that names files, every figure must be found in one of them **at the rounding written**:
   ``1.77×`` matches any number in ``[1.765, 1.775]``; a percentage also matches a fraction (``45.7%``
   = 0.457) or a ratio's change (``+7%`` = 1.07, ``23%`` fewer = 0.77); GB matches MB / 1024 or / 1000.
   Numbers inside the file's strings (its summaries) count, and so do the numbers of a named ``.md`` table.
5. A ``<name>_<kind>.md`` under ``results/`` embeds, verbatim, the ``table`` of every ``<name>-*.json`` it
   names (the table the benchmark generated from its figures), so a hand-edited or stale table fails.
6. In a **benchmark section** (all of ``benchmarks/README.md``; a section of the others whose heading says
   benchmark, results or measured), a block with figures must name a file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
NAMED = re.compile(r"(?:benchmarks/)?results/([\w.\-]+\.(?:json|md))")
UNITS = r"M(?=[\s-])|clients/s|samples/s|s/round|MB/round|TFLOP/s|GiB|MiB|MB|GB|ms|s\b|%|×(?![\s]*\d)|x\b"
FIGURE = re.compile(rf"(?<![\w.,/\-])([+\-−]?\d[\d,]*(?:\.\d+)?)(?:\s?({UNITS}))?")
BOUND = re.compile(r"(?:[≤≥<>]|<=|>=)\s*[+\-]?$")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
CODE = re.compile(r"`[^`]*`")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
MEASURED_HEADING = re.compile(r"benchmark|results|measured", re.I)
NUMBER = re.compile(r"[+\-]?\d+(?:\.\d+)?(?:[eE][+\-]?\d+)?")


@dataclass(frozen=True)
class Block:
    """One paragraph, list item or table row, where it starts, and what it names."""

    path: Path
    line: int
    text: str
    measured: bool  # in a benchmark section
    inherited: tuple[str, ...] = ()  # files named by the table's header or caption

    @property
    def named(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*NAMED.findall(self.text), *self.inherited]))


@dataclass(frozen=True)
class Figure:
    text: str
    value: float
    decimals: int
    unit: str


def blocks(path: Path) -> Iterator[Block]:
    """The blocks of one markdown file (rule 1), with the table inheritance of rule 2."""
    measured_file = path.name == "README.md" and path.parent.name == "benchmarks"
    measured = measured_file
    in_code = False
    current: list[str] = []
    start = 0
    caption: tuple[str, ...] = ()
    table_names: tuple[str, ...] | None = None

    def flush() -> Block | None:
        nonlocal current
        text = " ".join(current).strip()
        current = []
        return Block(path, start, text, measured) if text else None

    for n, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
            if (b := flush()) is not None:
                yield b
            continue
        if in_code:
            continue
        if stripped.startswith("|"):
            if (b := flush()) is not None:
                caption = b.named
                yield b
            if table_names is None:  # the header row: it and the caption name the table's files
                table_names = tuple(dict.fromkeys([*caption, *NAMED.findall(stripped)]))
            if not re.fullmatch(r"\|[\s:\-|]*\|?", stripped):
                yield Block(path, n, stripped, measured, table_names)
            continue
        table_names = None
        if not stripped or stripped.startswith("#") or re.match(r"([-*]|\d+\.)\s", stripped):
            if (b := flush()) is not None:
                caption = b.named
                yield b
            if stripped.startswith("#"):
                measured = measured_file or bool(MEASURED_HEADING.search(stripped))
                caption = ()
                continue
            if not stripped:
                continue
        if not current:
            start = n
        current.append(stripped)
    if (b := flush()) is not None:
        yield b


def figures(text: str) -> list[Figure]:
    """The figures of a block's text (rule 3)."""
    text = LINK_TARGET.sub("]", DATE.sub(" ", CODE.sub(" ", text)))
    found = []
    for m in FIGURE.finditer(text):
        number, unit = m.group(1), m.group(2) or ""
        if "." not in number and not unit:
            continue
        if BOUND.search(text[max(0, m.start() - 4) : m.start()]):
            continue
        digits = number.replace(",", "").replace("−", "-")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        found.append(Figure(m.group(0).strip(), float(digits), decimals, unit.strip()))
    return found


def numbers_in(path: Path) -> list[float]:
    """Every number of a results file: JSON values, numbers inside its strings; a table's numbers."""
    text = path.read_text()
    if path.suffix == ".md":
        return [float(x) for x in NUMBER.findall(text.replace(",", ""))]
    out: list[float] = []

    def walk(node: object) -> None:
        if isinstance(node, bool):
            return
        if isinstance(node, (int, float)):
            out.append(float(node))
        elif isinstance(node, str):
            out.extend(float(x) for x in NUMBER.findall(node.replace(",", "")))
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(json.loads(text))
    return out


def _candidates(x: float, unit: str) -> Iterable[float]:
    yield x
    if unit == "%":
        yield from (x * 100, (x - 1) * 100, (1 - x) * 100)
    elif unit in ("GB", "GiB"):
        yield from (x / 1024, x / 1000)
    elif unit == "ms":
        yield x * 1000
    elif unit == "M":  # "1.2M parameters"
        yield x / 1e6


def matches(figure: Figure, values: Iterable[float]) -> bool:
    """Rule 4: some value of the file, written at the figure's rounding, is the figure."""
    tolerance = 0.5 * 10**-figure.decimals + 1e-9
    target = abs(figure.value)
    return any(abs(abs(c) - target) <= tolerance for x in values for c in _candidates(x, figure.unit))


def check_file(path: Path, results: Path = RESULTS) -> list[str]:
    """Every broken rule in one markdown file, as ``path:line: message``."""
    problems = []
    for block in blocks(path):
        found = figures(block.text)
        if not found:
            continue
        where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{block.line}"
        if not block.named:
            if block.measured:
                shown = ", ".join(f.text for f in found[:5])
                problems.append(f"{where}: figures ({shown}) name no file under benchmarks/results/")
            continue
        missing = [name for name in block.named if not (results / name).is_file()]
        if missing:
            problems.append(f"{where}: names {', '.join(missing)}, which is not in benchmarks/results/")
            continue
        values = [v for name in block.named for v in numbers_in(results / name)]
        for f in found:
            if not matches(f, values):
                problems.append(f"{where}: {f.text!r} is not in {', '.join(block.named)} at that rounding")
    return problems


def check_generated_tables(results: Path = RESULTS) -> list[str]:
    """Rule 5: each results ``.md`` holds the current ``table`` of every JSON it names."""
    problems = []
    for md in sorted(results.glob("*.md")):
        text = md.read_text()
        prefix = md.stem.rsplit("_", 1)[0] + "-"
        for name in dict.fromkeys(n for n in re.findall(r"[\w.\-]+\.json", text) if n.startswith(prefix)):
            path = results / name
            if not path.is_file():
                problems.append(f"{md.name}: names {name}, which is not in benchmarks/results/")
                continue
            table = json.loads(path.read_text()).get("table")
            if isinstance(table, str) and table.strip() not in text:
                problems.append(f"{md.name}: the table of {name} is not in it as generated (stale or edited)")
    return problems


def documents(root: Path = ROOT) -> list[Path]:
    """The files the rule covers."""
    return [root / "README.md", root / "benchmarks" / "README.md", *sorted((root / "docs").glob("*.md"))]


def check_all(root: Path = ROOT) -> list[str]:
    """Every broken rule in the docs and the generated tables of ``root``."""
    results = root / "benchmarks" / "results"
    return [p for doc in documents(root) for p in check_file(doc, results)] + check_generated_tables(results)


if __name__ == "__main__":
    problems = check_all()
    print("\n".join(problems) or "every quoted figure is in its results file")
    raise SystemExit(1 if problems else 0)
