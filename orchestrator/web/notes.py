"""A run's notes as HTML: Markdown (CommonMark, with tables and strikethrough) where raw HTML is
shown as text, never run, and links go only to safe schemes (markdown-it refuses ``javascript:``,
``vbscript:``, ``file:`` and non-image ``data:`` links). The dashboard and the static report show it."""

from __future__ import annotations

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])


def render_notes(text: str) -> SafeString:
    return mark_safe(_MARKDOWN.render(text or ""))  # html=False: markdown-it escapes any tag in the text
