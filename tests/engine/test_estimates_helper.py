"""The estimates helper: one child process answers questions for a process without torch; what an
answer raises is raised in the caller; a helper that dies or hangs fails that question, by name,
and the next question gets a new one; an idle helper exits."""

from __future__ import annotations

import os

import pytest

from fedweb_engine.estimates.helper import Helper, HelperFailed
from fedweb_engine.spec.validation import SpecError
from tests.live import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def helper():
    helper = Helper(idle_seconds=300, timeout_seconds=60, answers="tests.engine.helper_answers")
    yield helper
    helper.stop()


def test_one_child_answers_in_turn_and_what_an_answer_raises_is_raised_here(helper):
    first = helper.ask("echo", (1,))
    assert first["value"] == 1 and first["pid"] not in (None, os.getpid()) and first["torch"] is False
    with pytest.raises(SpecError) as refused:
        helper.ask("refuse", ("model.options.width",))
    assert refused.value.field == "model.options.width" and str(refused.value).endswith("is refused by the helper")
    with pytest.raises(RuntimeError, match=r"^PluginTrouble: the loader broke$"):
        helper.ask("trouble", ())
    assert helper.ask("echo", (2,))["pid"] == first["pid"] and helper.started == 1


def test_a_helper_that_dies_fails_that_question_and_the_next_gets_a_new_one(helper):
    first = helper.ask("echo", ("a",))["pid"]
    with pytest.raises(HelperFailed, match=r"died answering die \(exit code 3\)"):
        helper.ask("die", ())
    again = helper.ask("echo", ("b",))
    assert again["value"] == "b" and again["pid"] != first and helper.started == 2


def test_a_question_that_outlives_the_timeout_kills_the_helper(helper):
    helper.ask("echo", (0,))
    helper.timeout_seconds = 1.0
    hung = helper.pid
    with pytest.raises(HelperFailed, match=r"did not answer hang in 1 s"):
        helper.ask("hang", (120,))
    assert helper.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(hung, 0)  # killed, not left behind
    helper.timeout_seconds = 60
    assert helper.ask("echo", (3,))["value"] == 3 and helper.started == 2


def test_an_idle_helper_exits(helper):
    helper.idle_seconds = 1.0
    helper.ask("echo", (0,))
    child = helper.pid
    wait_for(lambda: helper.pid is None, 30, "the idle helper to exit", observe=lambda: helper.pid)
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)
