"""test_conditions.py again, marked ``postgres``: ``make test`` runs these on PostgreSQL when one
answers (and on SQLite otherwise), the unmarked originals on SQLite, so every query is checked on both."""

import pytest

from tests.runs.test_conditions import *  # noqa: F403

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]
