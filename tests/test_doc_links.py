"""Every page the README and docs/ name (a link or a bare ``name.md``) is in the repository, and every
relative link leads to a file that exists: a reader following one never meets a dead end."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
NAMED_PAGE = re.compile(r"(?<![\w/.-])([\w./-]*[A-Za-z0-9_]\.md)\b")


def _missing(page: Path, target: str) -> bool:
    if "://" in target or target.startswith("mailto:"):
        return False
    return not any((base / target).exists() for base in (page.parent, ROOT))


def test_every_relative_link_and_named_page_exists():
    dead = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        targets = set(LINK.findall(text)) | set(NAMED_PAGE.findall(text))
        dead += [f"{page.relative_to(ROOT)}: {t}" for t in sorted(targets) if _missing(page, t)]
    assert dead == []
