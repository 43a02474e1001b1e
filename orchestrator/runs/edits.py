"""The words of a run, editable after its creation by anyone who may change it (its name, description,
tags and Markdown notes), and the record of every edit: who changed which, when, from what to what.

``Experiment.edit_words`` applies the edits; ``check_words`` is the one check of the values (the
edit form and the API both call it), each error keyed by the field it names.
"""

from __future__ import annotations

import unicodedata

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

WORDS = ("name", "description", "tags", "notes")
MAX_NAME = 200
MAX_DESCRIPTION = 5_000
MAX_NOTES = 50_000
MAX_TAGS = 20
MAX_TAG = 50


class RunEdit(models.Model):
    """One changed word of a run: the field, its value before and after, by whom and when."""

    experiment = models.ForeignKey("orchestrator.Experiment", models.CASCADE, related_name="edits")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    username = models.CharField(max_length=150)  # kept when the account is deleted
    time = models.DateTimeField(default=timezone.now)
    field = models.CharField(max_length=16, choices=[(w, w) for w in WORDS])
    old = models.JSONField(null=True)
    new = models.JSONField(null=True)

    class Meta:
        ordering = ["-time", "-id"]
        indexes = [models.Index(fields=["experiment", "-time"], name="run_edit_by_time")]


def _printable(text: str) -> bool:
    # Line breaks and tabs are text; other control characters (NUL, escapes) are not.
    return not any(unicodedata.category(c) in ("Cc", "Cs") and c not in "\n\r\t" for c in text)


def clean_tags(tags: list) -> list[str]:
    """Tags stripped, without blanks and repeats, in their order; a ValidationError naming ``tags``."""
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValidationError({"tags": "tags must be a list of strings"})
    cleaned = list(dict.fromkeys(t.strip() for t in tags if t.strip()))
    if len(cleaned) > MAX_TAGS:
        raise ValidationError({"tags": f"at most {MAX_TAGS} tags, not {len(cleaned)}"})
    for tag in cleaned:
        if len(tag) > MAX_TAG or not _printable(tag) or "," in tag:
            raise ValidationError({"tags": f"a tag is at most {MAX_TAG} printable characters without commas"})
    return cleaned


def check_words(changes: dict) -> dict:
    """``changes`` (some of ``WORDS``) checked and normalised; a ValidationError keyed by field."""
    limits = {"name": MAX_NAME, "description": MAX_DESCRIPTION, "notes": MAX_NOTES}
    out, errors = {}, {}
    for field, value in changes.items():
        if field not in WORDS:
            errors[field] = f"{field} cannot be edited (only {', '.join(WORDS)})"
        elif field == "tags":
            try:
                out[field] = clean_tags(value)
            except ValidationError as e:
                errors.update(e.message_dict)
        elif not isinstance(value, str):
            errors[field] = f"{field} must be text"
        elif len(value) > limits[field]:
            errors[field] = f"{field} is at most {limits[field]} characters, not {len(value)}"
        elif not _printable(value):
            errors[field] = f"{field} contains a control character"
        elif field == "name" and not value.strip():
            errors[field] = "name cannot be blank"
        else:
            out[field] = value.strip() if field == "name" else value
    if errors:
        raise ValidationError(errors)
    return out
