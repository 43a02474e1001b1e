"""Each round field is defined once (issue 18): no reader of the rounds (the web, the domain, the
worker glue, the pages' scripts and templates) lists two or more round field names of its own; each
reads them from ``fedweb_engine/results/round_fields.py``.

The engine and the benchmarks are left out: the engine fills the fields (a probe's dict of
``rss_mb``, ``threads``, ``vram_*`` is where those values are made), and a benchmark fakes or reads
rounds of its own. ``clients/python`` is a package of its own that cannot import the server.
"""

from __future__ import annotations

from fedweb_engine.results import round_fields
from tests.engine.test_no_name_lists import ROOT, python_findings, script_findings

READERS = ("orchestrator", "fedweb", "accounts", "workers", "static/js", "templates")
SKIP = ("fedweb_engine", "orchestrator/migrations")  # the producer; migrations restate columns by design


def _names() -> dict[str, set[str]]:
    return {"round field": {f.name for f in round_fields.FIELDS}}


def _files():
    for top in READERS:
        for path in sorted((ROOT / top).rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if path.suffix in (".py", ".js", ".html") and path.is_file() and not rel.startswith(SKIP):
                yield rel, path


def test_no_reader_lists_two_round_field_names():
    names, findings = _names(), []
    for rel, path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        found = python_findings(text, names) if path.suffix == ".py" else script_findings(text, names)
        findings += [f"{rel}:{f}" for f in found]
    assert findings == []


def test_it_finds_a_restated_list_of_round_fields():
    names = _names()
    assert python_findings('TOTALS = ("bytes_up", "bytes_down")\n', names) == [
        "1: round field names ['bytes_down', 'bytes_up']"
    ]
    assert python_findings('DEFAULTS = {"round_seconds": 0.0, "rss_mb": 0.0}\nONE = ["test_accuracy"]\n', names) == [
        "1: round field names ['round_seconds', 'rss_mb']"
    ]
    assert script_findings('const keys = ["test_loss", "train_loss"];', names) != []
    assert sum(1 for _ in _files()) > 50  # the readers were walked
