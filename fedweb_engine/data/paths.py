"""Dataset paths confined to one folder, the datasets root.

A spec's ``data.path`` is taken relative to the root (an absolute path is accepted only when it
lies inside it), resolved with symlinks followed, and refused when the result is anywhere else.
Every refusal gives the same message, whether or not the target exists, so a spec cannot be
used to probe the machine's filesystem.
"""

from __future__ import annotations

import os
from pathlib import Path

from fedweb_engine.components.registry import option
from fedweb_engine.spec.schema import SpecError

MAX_PATH_LENGTH = 1024
OUTSIDE = "must name a file or folder inside the server's datasets folder, relative to it (e.g. femnist/)"


def required_path(help: str):
    """The option of a dataset read from the user's files: a required path, relative to the datasets
    folder, confined there at submission and again before reading (``registry.option(path=True)``)."""
    return option(
        None, f"{help}, relative to the server's datasets folder.", nullable=True, max_length=MAX_PATH_LENGTH, path=True
    )


def default_data_root() -> Path:
    """``$FEDWEB_DATA_DIR/datasets`` when FEDWEB_DATA_DIR is set, else the current directory
    (the engine CLI run in a user's own terminal, on their own files)."""
    data_dir = os.environ.get("FEDWEB_DATA_DIR")
    return Path(data_dir) / "datasets" if data_dir else Path.cwd()


def confine(path: str, root: str | Path, field: str = "data.options.path") -> Path:
    """The real, absolute location of ``path`` inside ``root``, or :class:`SpecError` on ``field``.

    Nothing needs to exist: a path is judged by where it would lead, so the answer is the same
    for a missing target and for one that exists outside the root.
    """
    if not isinstance(path, str) or not path.strip() or len(path) > MAX_PATH_LENGTH or "\x00" in path:
        raise SpecError(field, OUTSIDE)
    try:
        base = Path(root).resolve()
        target = (base / path).resolve()  # an absolute `path` replaces `base` here; symlinks are followed
    except (OSError, RuntimeError, ValueError):  # too long, a symlink loop, an unencodable name
        raise SpecError(field, OUTSIDE) from None
    if target != base and base not in target.parents:
        raise SpecError(field, OUTSIDE)
    return target
