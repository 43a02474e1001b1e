"""Datasets: shapes, dtypes, partitions and file formats, on tiny generated or hand-written files."""

import json
import os
import pickle

import h5py
import numpy as np
import pytest
import torch

from fedweb_engine.data import as_input, build_data, partition_summary
from fedweb_engine.data.cifar10 import restricted_load
from fedweb_engine.spec import legacy as spec_legacy
from fedweb_engine.spec.schema import DataSpec, SpecError
from fedweb_engine.spec.validation import build


def _spec(**kw) -> DataSpec:
    """A data section from the old flat keys (``dataset=``, ``image_size=``): upgraded as stored specs are."""
    return build(DataSpec, spec_legacy.upgrade({"data": kw})["data"], bounds=True)


def _assert_well_formed(data, num_clients):
    assert data.num_clients == num_clients
    assert int(data.offsets[0]) == 0 and int(data.offsets[-1]) == len(data.x_train) == len(data.y_train)
    assert int(data.client_sizes().min()) >= 1
    assert data.y_train.dtype == torch.int64 and data.y_test.dtype == torch.int64
    assert tuple(data.x_train.shape[1:]) == data.input_shape == tuple(data.x_test.shape[1:])


def _assert_same(a, b):
    for name in ("x_train", "y_train", "offsets", "x_test", "y_test"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


# -- file writers in the exact formats users have ----------------------------------------------------


def _write_h5(path, writers, seed, digits_only=False):
    rng = np.random.default_rng(seed)
    with h5py.File(path, "w") as f:
        for name, n in writers.items():
            group = f.create_group(f"examples/{name}")
            group["pixels"] = rng.random((n, 28, 28), dtype=np.float32)
            group["label"] = rng.integers(10 if digits_only else 62, size=n).astype(np.int32)


def _write_leaf(folder, split, users):
    rng = np.random.default_rng(len(users))
    blob = {"users": list(users), "num_samples": list(users.values()), "user_data": {}}
    for user, n in users.items():
        blob["user_data"][user] = {"x": rng.random((n, 784)).round(3).tolist(), "y": rng.integers(62, size=n).tolist()}
    (folder / split).mkdir(parents=True, exist_ok=True)
    (folder / split / "all_data_0.json").write_text(json.dumps(blob))


def _write_cifar(folder, per_batch=6):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            b"labels": rng.integers(10, size=per_batch).tolist(),
        }
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f, protocol=2)


# -- digits and generated datasets ------------------------------------------------------------------


def test_it_builds_digits_at_28_pixels():
    # Execute
    data = build_data(_spec(dataset="digits", num_clients=10, image_size=28), seed=0)

    # Assert
    _assert_well_formed(data, 10)
    assert data.x_train.shape[1:] == (1, 28, 28) and data.x_train.dtype == torch.float32
    assert 0.0 <= float(data.x_train.min()) and float(data.x_train.max()) <= 1.0
    assert len(data.x_train) + len(data.x_test) == 1797
    assert len(data.x_test) == pytest.approx(0.2 * 1797, abs=10)


def test_it_builds_native_digits_deterministically():
    # Prepare
    spec = _spec(dataset="digits", num_clients=5, image_size=8, partition="dirichlet", alpha=0.1)

    # Execute
    a, b = build_data(spec, seed=3), build_data(spec, seed=3)

    # Assert
    assert a.x_train.shape[1:] == (1, 8, 8)
    _assert_same(a, b)
    assert not torch.equal(a.offsets, build_data(spec, seed=4).offsets)


def test_it_rebalances_so_no_client_is_empty():
    # Prepare: 200 clients, one shard each of a label-sorted array, tiny alpha -> many empty clients
    spec = _spec(dataset="digits", num_clients=200, image_size=8, partition="dirichlet", alpha=0.01)

    # Execute
    data = build_data(spec, seed=0)

    # Assert
    _assert_well_formed(data, 200)


def test_it_refuses_more_clients_than_samples():
    with pytest.raises(SpecError) as e:
        build_data(_spec(dataset="digits", num_clients=5000, image_size=8), seed=0)
    assert e.value.field == "data.num_clients"


def test_it_summarises_label_counts_that_add_up():
    # Execute
    summary = partition_summary(
        _spec(dataset="digits", num_clients=12, image_size=8, partition="shards"), 0, max_clients=5
    )

    # Assert
    assert summary["num_clients"] == 12 and len(summary["samples"]) == 5
    assert [sum(c) for c in summary["label_counts"]] == summary["samples"]
    assert all(sum(1 for v in c if v) <= 3 for c in summary["label_counts"])


def test_it_builds_fedprox_synthetic_with_one_device_per_client():
    # Execute
    data = build_data(_spec(dataset="synthetic", num_clients=6, partition="natural"), seed=0)

    # Assert
    _assert_well_formed(data, 6)
    assert data.input_shape == (60,) and data.num_classes == 10 and data.x_train.dtype == torch.float32
    assert data.writers == [f"device_{i}" for i in range(6)]
    assert int(data.client_sizes().min()) >= 40  # 50+ samples per device, 20% held out
    _assert_same(data, build_data(_spec(dataset="synthetic", num_clients=6, partition="natural"), seed=0))


def test_it_resplits_synthetic_for_other_partitions():
    data = build_data(_spec(dataset="synthetic", num_clients=6, partition="iid"), seed=0)
    _assert_well_formed(data, 6)
    assert int(data.client_sizes().max() - data.client_sizes().min()) <= 1


def test_it_builds_learnable_synthetic_images():
    # Execute
    data = build_data(_spec(dataset="synthetic_images", num_clients=40, partition="natural"), seed=1)

    # Assert: uint8 pixels, and a nearest-centroid rule already separates the classes
    _assert_well_formed(data, 40)
    assert data.x_train.dtype == torch.uint8 and data.input_shape == (1, 28, 28)
    x, xt = as_input(data.x_train).flatten(1), as_input(data.x_test).flatten(1)
    centroids = torch.stack([x[data.y_train == c].mean(0) for c in range(10)])
    accuracy = (torch.cdist(xt, centroids).argmin(1) == data.y_test).float().mean()
    assert accuracy > 0.8


def test_it_builds_3400_femnist_sized_writers():
    # Prepare (how long it takes is measured by the flute_femnist benchmark's set-up time)
    spec = _spec(dataset="synthetic_images", num_clients=3400, num_classes=62, partition="natural", test_fraction=0.1)

    # Execute
    data = build_data(spec, seed=0)

    # Assert
    assert data.num_clients == 3400 and int(data.client_sizes().min()) >= 10
    assert float(data.client_sizes().float().mean()) == pytest.approx(100, rel=0.15)
    assert int(data.y_train.max()) == 61


def test_it_builds_a_token_corpus():
    # Execute
    data = build_data(_spec(dataset="tokens", num_clients=4, partition="natural", mean_samples=3, seq_len=8), seed=0)

    # Assert
    _assert_well_formed(data, 4)
    assert data.task == "lm" and data.num_classes == 50304 and data.input_shape == (8,)
    assert data.x_train.dtype == torch.int64 and data.y_train.shape == data.x_train.shape
    assert torch.equal(data.x_train[:, 1:], data.y_train[:, :-1])  # y is x shifted by one token
    assert int(data.x_train.max()) < 50304
    assert (
        partition_summary(_spec(dataset="tokens", num_clients=4, partition="iid", mean_samples=3, seq_len=8), 0)[
            "label_counts"
        ]
        == []
    )


def test_it_rejects_label_partitions_for_tokens():
    with pytest.raises(SpecError) as e:
        build_data(_spec(dataset="tokens", num_clients=2, partition="dirichlet", mean_samples=2, seq_len=4), seed=0)
    assert e.value.field == "data.partition"


# -- files users have --------------------------------------------------------------------------------


def test_it_reads_federated_emnist_h5_by_writer(tmp_path):
    # Prepare
    _write_h5(tmp_path / "fed_emnist_train.h5", {"f0003": 4, "f0001": 3, "f0002": 2}, seed=0)
    _write_h5(tmp_path / "fed_emnist_test.h5", {"f0001": 2, "f0002": 1}, seed=1)

    # Execute
    data = build_data(
        _spec(dataset="emnist_h5", path=str(tmp_path), num_clients=2, partition="natural"), seed=0, data_root=tmp_path
    )

    # Assert: the first two writers in sorted order, the whole test file
    _assert_well_formed(data, 2)
    assert data.writers == ["f0001", "f0002"]
    assert data.client_sizes().tolist() == [3, 2]
    assert len(data.y_test) == 3 and data.num_classes == 62
    assert data.x_train.dtype == torch.uint8 and data.x_train.shape[1:] == (1, 28, 28)
    with h5py.File(tmp_path / "fed_emnist_train.h5") as f:
        stored = torch.from_numpy(np.asarray(f["examples/f0001/pixels"]))
    assert torch.allclose(as_input(data.x_train[:3, 0]), stored, atol=1 / 255)


def test_it_resplits_pooled_emnist_from_the_train_file(tmp_path):
    # Prepare
    train = tmp_path / "fed_emnist_digitsonly_train.h5"
    _write_h5(train, {"a": 5, "b": 5, "c": 2}, seed=0, digits_only=True)
    _write_h5(tmp_path / "fed_emnist_digitsonly_test.h5", {"a": 2}, seed=1, digits_only=True)

    # Execute
    data = build_data(
        _spec(dataset="emnist_h5", path=str(train), num_clients=4, partition="iid"), seed=0, data_root=tmp_path
    )

    # Assert
    _assert_well_formed(data, 4)
    assert len(data.y_train) == 12 and data.num_classes == 10 and data.writers is None


def test_it_refuses_more_writers_than_the_file_has(tmp_path):
    _write_h5(tmp_path / "fed_emnist_train.h5", {"a": 2}, seed=0)
    _write_h5(tmp_path / "fed_emnist_test.h5", {"a": 1}, seed=1)
    with pytest.raises(SpecError) as e:
        build_data(
            _spec(dataset="emnist_h5", path=str(tmp_path), num_clients=2, partition="natural"),
            seed=0,
            data_root=tmp_path,
        )
    assert e.value.field == "data.num_clients"


@pytest.mark.parametrize("dataset", ["emnist_h5", "femnist_leaf", "cifar10"])
def test_it_names_data_path_when_files_are_missing(tmp_path, dataset):
    with pytest.raises(SpecError) as e:
        build_data(
            _spec(dataset=dataset, path=str(tmp_path / "nowhere"), num_clients=1, partition="iid"),
            seed=0,
            data_root=tmp_path,
        )
    assert e.value.field == "data.options.path"


def test_it_reads_leaf_json_by_user(tmp_path):
    # Prepare
    _write_leaf(tmp_path, "train", {"u2": 3, "u1": 2, "u3": 1})
    _write_leaf(tmp_path, "test", {"u1": 1, "u2": 1})

    # Execute
    data = build_data(
        _spec(dataset="femnist_leaf", path=str(tmp_path), num_clients=3, partition="natural"),
        seed=0,
        data_root=tmp_path,
    )

    # Assert
    _assert_well_formed(data, 3)
    assert data.writers == ["u1", "u2", "u3"] and data.client_sizes().tolist() == [2, 3, 1]
    assert data.num_classes == 62 and len(data.y_test) == 2
    assert data.x_train.shape[1:] == (1, 28, 28)


def test_it_reads_cifar10_batches(tmp_path):
    # Prepare
    _write_cifar(tmp_path / "cifar-10-batches-py")

    # Execute
    data = build_data(
        _spec(dataset="cifar10", path=str(tmp_path), num_clients=3, partition="shards"), seed=0, data_root=tmp_path
    )

    # Assert
    _assert_well_formed(data, 3)
    assert data.x_train.dtype == torch.uint8 and data.x_train.shape == (30, 3, 32, 32)
    assert len(data.y_test) == 6 and data.num_classes == 10
    _assert_same(
        data,
        build_data(
            _spec(dataset="cifar10", path=str(tmp_path), num_clients=3, partition="shards"), 0, data_root=tmp_path
        ),
    )


class _Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_it_refuses_a_malicious_pickle():
    # Prepare
    payload = pickle.dumps({b"data": _Exploit()}, protocol=2)

    # Execute / Assert
    with pytest.raises(pickle.UnpicklingError, match="system"):
        restricted_load(payload)


def test_it_reports_a_malicious_cifar_batch_as_a_bad_path(tmp_path):
    # Prepare
    folder = tmp_path / "batches"
    _write_cifar(folder)
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": _Exploit(), b"labels": []}))

    # Execute / Assert
    with pytest.raises(SpecError) as e:
        build_data(
            _spec(dataset="cifar10", path=str(folder), num_clients=1, partition="iid"), seed=0, data_root=tmp_path
        )
    assert e.value.field == "data.options.path" and "test_batch" in str(e.value)
