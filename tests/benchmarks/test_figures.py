"""Every figure the README and docs quote is in the results file they name (benchmarks/figures.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks.figures import ROOT, Figure, blocks, check_all, check_file, figures, matches


def _copy(tmp_path: Path) -> Path:
    """A copy of the docs and the results, to tamper with."""
    for doc in ("README.md", "benchmarks/README.md"):
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copytree(ROOT / "benchmarks" / "results", tmp_path / "benchmarks" / "results")
    return tmp_path


def test_it_finds_every_quoted_figure_in_its_results_file():
    problems = check_all()
    assert not problems, "\n".join(problems)


def test_it_fails_when_a_quoted_figure_is_edited(tmp_path):
    root = _copy(tmp_path)
    readme = root / "README.md"
    text = readme.read_text()
    record = json.loads((root / "benchmarks/results/engine_overhead-full-cpu.json").read_text())
    quoted = f"{record['ratios']['engine_vs_plain_loop']['median']:.2f}×"
    assert quoted in text  # the README quotes the headline
    assert check_all(root) == []
    # A figure no number of the file rounds to (a run's 9.868 s once matched the old sentinel, 9.87×).
    readme.write_text(text.replace(quoted, "9876.54×", 1))
    problems = check_all(root)
    assert any("'9876.54×' is not in engine_overhead-full-cpu.json" in p for p in problems), problems


def test_it_fails_when_the_results_file_changes_under_a_quoted_figure(tmp_path):
    root = _copy(tmp_path)
    path = root / "benchmarks/results/isolation_leak-cpu.json"
    record = json.loads(path.read_text())
    record["cost"]["process_s_per_round"] = 7.25
    record["cost"]["added_s_per_round"] = 7.25
    path.write_text(json.dumps(record))
    assert any("isolation_leak-cpu.json" in p for p in check_all(root))


def test_it_flags_a_figure_in_a_benchmark_section_that_names_no_file(tmp_path):
    doc = tmp_path / "README.md"
    doc.write_text("# X\n\nThe engine is fast: 3.1x.\n\n## Benchmarks\n\nThe engine ran 2.5x the loop.\n")
    problems = check_file(doc, tmp_path)
    assert len(problems) == 1 and "2.5x" in problems[0] and "name no file" in problems[0]


def test_it_reads_figures_at_their_rounding_and_skips_bounds_dates_and_code():
    found = figures("On 2026-11-24 `torch 2.13` ran 1,063 samples/s, 1.77× (target ≥ 1.0×), +7% RSS, 28×28 images")
    assert [(f.text, f.decimals, f.unit) for f in found] == [
        ("1,063 samples/s", 0, "samples/s"),
        ("1.77×", 2, "×"),
        ("+7%", 0, "%"),
    ]
    assert matches(Figure("1.77×", 1.77, 2, "×"), [1.7749]) and not matches(Figure("1.77×", 1.77, 2, "×"), [1.776])
    assert matches(Figure("45.7%", 45.7, 1, "%"), [0.4571]) and matches(Figure("+7%", 7, 0, "%"), [1.068])
    assert matches(Figure("2.6 GB", 2.6, 1, "GB"), [2618.8])


def test_a_table_row_uses_the_file_its_caption_names(tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("Measured (`benchmarks/results/a.json`):\n\n| x | y |\n|---|---|\n| run | 1.5x |\n")
    rows = [b for b in blocks(doc) if b.text.startswith("| run")]
    assert rows[0].named == ("a.json",)


def test_it_fails_when_a_generated_table_no_longer_matches_its_file(tmp_path):
    root = _copy(tmp_path)
    md = root / "benchmarks/results/scheduling_real_cpu.md"
    record = json.loads((root / "benchmarks/results/scheduling_real-small-cpu.json").read_text())
    first_row = record["table"].splitlines()[2]
    assert check_all(root) == [] and first_row in md.read_text()
    md.write_text(md.read_text().replace(first_row, first_row.replace("|", "| 9.99 |", 2).replace("| 9.99 |", "|", 1)))
    assert any("scheduling_real_cpu.md: the table of scheduling_real-small-cpu.json" in p for p in check_all(root))
