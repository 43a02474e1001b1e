"""Checkpoint files: written atomically, read back exactly, an unknown format refused."""

import json

import pytest
import torch
from safetensors.torch import save_file

from fedweb_engine.state import checkpoint
from fedweb_engine.state.checkpoint import CHECKPOINT_FORMAT, read_checkpoint, write_checkpoint


def test_it_reads_back_what_it_wrote(tmp_path):
    tensors = {"global": torch.arange(6, dtype=torch.float32), "strategy.m": torch.ones(2, 3)}
    path = tmp_path / "deep" / "folder" / "ck.safetensors"

    size = write_checkpoint(path, tensors, {"round": 4, "spec": {"seed": 1}})
    back, meta = read_checkpoint(path)

    assert size == path.stat().st_size > 0
    assert set(back) == set(tensors) and all(torch.equal(back[k], tensors[k]) for k in tensors)
    assert meta == {"round": 4, "spec": {"seed": 1}, "format": CHECKPOINT_FORMAT}
    assert [p.name for p in path.parent.iterdir()] == ["ck.safetensors"]  # no temporary file left


def test_it_keeps_the_previous_file_when_a_write_fails_midway(tmp_path, monkeypatch):
    path = tmp_path / "ck.safetensors"
    write_checkpoint(path, {"global": torch.zeros(3)}, {"round": 1})

    def crash_after_writing(tmp):
        raise OSError("disk full")  # the temporary file exists, the rename has not happened

    monkeypatch.setattr(checkpoint, "_flush_to_disk", crash_after_writing)
    with pytest.raises(OSError, match="disk full"):
        write_checkpoint(path, {"global": torch.ones(3)}, {"round": 2})

    tensors, meta = read_checkpoint(path)
    assert meta["round"] == 1 and torch.equal(tensors["global"], torch.zeros(3))
    assert [p.name for p in tmp_path.iterdir()] == ["ck.safetensors"]


def test_it_refuses_a_file_of_another_format(tmp_path):
    path = tmp_path / "ck.safetensors"
    save_file({"global": torch.zeros(1)}, str(path), metadata={"fedweb": json.dumps({"format": 99})})

    with pytest.raises(ValueError, match="unsupported checkpoint format 99"):
        read_checkpoint(path)
