"""The lock file `make` installs from: every package pinned with hashes, torch the CPU build, and
every requirement of requirements*.txt in it (issue 21: installs that don't drift)."""

from __future__ import annotations

import re

from tests.live import ROOT

LOCK = ROOT / "requirements-dev.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$")


def _pins() -> dict[str, tuple[str, list[str]]]:
    """{normalised name: (version, [hashes])} of the lock."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in LOCK.read_text().splitlines():
        if match := PIN.match(line):
            current = _norm(match.group(1))
            pins[current] = (match.group(2), [])
        elif line.strip().startswith("--hash=sha256:") and current:
            pins[current][1].append(line.strip().removeprefix("--hash=sha256:").rstrip(" \\"))
    return pins


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements() -> set[str]:
    names = set()
    for path in ("requirements.txt", "requirements-dev.txt"):
        for line in (ROOT / path).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-r"):
                names.add(_norm(re.split(r"[\[<>=!~; ]", line)[0]))
    return names


def test_every_package_of_the_lock_is_pinned_exactly_with_a_hash():
    pins = _pins()
    requirement_lines = [line for line in LOCK.read_text().splitlines() if line and not line.startswith((" ", "#"))]

    assert len(pins) == len(requirement_lines) > 50
    assert all(len(h) == 64 for _, hashes in pins.values() for h in hashes)
    assert [name for name, (_, hashes) in pins.items() if not hashes] == []


def test_torch_is_the_pinned_cpu_build_and_no_cuda_package_comes_with_it():
    pins = _pins()

    assert pins["torch"][0] in ("2.13.0", "2.13.0+cpu")
    cuda = [name for name in pins if name.startswith(("nvidia-", "triton")) and name != "nvidia-ml-py"]
    assert cuda == []


def test_every_requirement_is_in_the_lock():
    assert _requirements() - set(_pins()) == set()
