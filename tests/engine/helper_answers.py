"""Questions for the estimates helper's tests: an answer, the ways an answer fails, and a hang."""

import os
import sys
import time

from fedweb_engine.spec.validation import SpecError


class PluginTrouble(Exception):
    """An exception class of a module the asking process may not have imported."""


def echo(value):
    return {"value": value, "pid": os.getpid(), "torch": "torch" in sys.modules}


def refuse(field):
    raise SpecError(field, "is refused by the helper")


def trouble():
    raise PluginTrouble("the loader broke")


def die():
    os._exit(3)


def hang(seconds):
    time.sleep(seconds)
