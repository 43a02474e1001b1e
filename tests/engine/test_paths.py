"""data.path stays inside the datasets root (issue 11, item 6)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fedweb_engine.data import build_data
from fedweb_engine.data.paths import OUTSIDE, confine
from fedweb_engine.spec.schema import DataSpec, SpecError
from fedweb_engine.spec.validation import build


def _cifar(path: str, **kw) -> DataSpec:
    return build(DataSpec, {"name": "cifar10", "options": {"path": path}, **kw}, bounds=True)


ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def root(tmp_path):
    datasets = tmp_path / "datasets"
    (datasets / "femnist" / "train").mkdir(parents=True)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "passwords.txt").write_text("hunter2")
    (datasets / "escape").symlink_to(tmp_path / "secret")
    (datasets / "inner").symlink_to(datasets / "femnist")
    return datasets


@pytest.mark.parametrize("path", ["femnist", "femnist/train", "./femnist/../femnist", "inner", "not-there-yet", "."])
def test_it_accepts_paths_inside_the_root(root, path):
    assert confine(path, root).is_relative_to(root.resolve())


def test_it_accepts_an_absolute_path_inside_the_root(root):
    assert confine(str(root / "femnist"), root) == (root / "femnist").resolve()


@pytest.mark.parametrize(
    "path",
    [
        "/etc",
        "/etc/passwd",
        "../../..",
        "..",
        "femnist/../../secret",
        "escape",
        "escape/passwords.txt",
        "/nonexistent/anything",
        "femnist\x00/etc",
        "",
        "   ",
        "a/" * 600,
    ],
    ids=[
        "etc",
        "etc-file",
        "dotdot3",
        "dotdot",
        "dotdot-nested",
        "symlink-out",
        "through-symlink",
        "absent",
        "nul",
        "empty",
        "blank",
        "too-long",
    ],  # fmt: skip
)
def test_it_refuses_every_escape_with_one_message_that_reveals_nothing(root, path):
    with pytest.raises(SpecError) as err:
        confine(path, root)

    assert err.value.field == "data.options.path" and err.value.message == OUTSIDE
    assert "secret" not in str(err.value) and "passwords" not in str(err.value) and str(root) not in str(err.value)


def test_it_gives_the_same_answer_whether_an_outside_target_exists_or_not(root, tmp_path):
    messages = set()
    for path in (str(tmp_path / "secret"), str(tmp_path / "no-such-folder"), "../secret", "../no-such-folder"):
        with pytest.raises(SpecError) as err:
            confine(path, root)
        messages.add(str(err.value))
    assert len(messages) == 1


def test_it_never_reads_outside_the_root_even_when_the_files_are_valid(tmp_path):
    from tests.engine.test_data import _write_cifar

    outside = tmp_path / "outside"
    _write_cifar(outside / "cifar-10-batches-py")
    spec = _cifar(str(outside), num_clients=2, partition="iid")
    assert build_data(spec, 0, data_root=tmp_path).num_clients == 2  # readable from a root that holds it

    (tmp_path / "datasets").mkdir()
    for path in (str(outside), "../outside"):
        with pytest.raises(SpecError) as err:
            build_data(
                _cifar(path, num_clients=2, partition="iid"),
                0,
                data_root=tmp_path / "datasets",
            )
        assert err.value.message == OUTSIDE


def test_it_confines_the_cli_to_its_data_root(tmp_path):
    from tests.engine.test_data import _write_cifar

    _write_cifar(tmp_path / "mine" / "cifar-10-batches-py")
    (tmp_path / "elsewhere").mkdir()
    spec = {"rounds": 1, "data": {"dataset": "cifar10", "path": str(tmp_path / "mine"), "num_clients": 2, "partition": "iid"},
            "model": {"name": "logistic"}, "participation": {"clients_per_round": 2}, "compute": {"device": "cpu"}}  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    cli = [sys.executable, "-m", "fedweb_engine", "run", str(tmp_path / "spec.json"), "--quiet", "--data-root"]

    inside = subprocess.run([*cli, str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    outside = subprocess.run([*cli, str(tmp_path / "elsewhere")], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)  # fmt: skip

    assert inside.returncode == 0 and json.loads(inside.stdout)["round"] == 1, inside.stderr
    assert outside.returncode == 2 and f"data.options.path {OUTSIDE}" in outside.stderr
