"""The built-in ``npz`` dataset: files users bring, read safely from inside the datasets folder."""

from pathlib import Path

import numpy as np
import pytest
import torch

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DataContext
from fedweb_engine.data.npz import WHERE
from fedweb_engine.spec.schema import SpecError


@pytest.fixture
def root(tmp_path):
    datasets = tmp_path / "datasets"
    datasets.mkdir()
    return datasets


def _images(n, seed, classes=3):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 1, 4, 4), dtype=np.uint8), rng.integers(0, classes, n)


def _load(root, **options):
    npz = registry.get("dataset", "npz")
    ctx = DataContext(test_fraction=0.2, data_root=root, num_clients=2)
    return npz.factory(npz.options(**options), np.random.default_rng(0), ctx)


def test_npz_is_registered_as_a_natural_dataset_with_a_path_option():
    npz = registry.get("dataset", "npz")
    assert npz.builtin and npz.traits["natural"] and npz.traits["context"]
    path = {f.name: f for f in __import__("dataclasses").fields(npz.options)}["path"]
    assert path.metadata["path"] is True


def test_a_single_file_with_a_test_split_loads_as_stored(root):
    x, y = _images(20, 0)
    xt, yt = _images(6, 1)
    y[0] = 4  # the largest label sets the classes
    np.savez(root / "mine.npz", x_train=x, y_train=y, x_test=xt, y_test=yt)
    pool = _load(root, path="mine.npz")
    assert pool.x_train.dtype == torch.uint8 and torch.equal(pool.x_train, torch.from_numpy(x))
    assert pool.y_train.dtype == torch.int64 and pool.y_train.tolist() == y.tolist()
    assert torch.equal(pool.x_test, torch.from_numpy(xt)) and pool.y_test.tolist() == yt.tolist()
    assert pool.num_classes == 5 and pool.input_shape == (1, 4, 4)
    assert pool.writer_ids is None


def test_a_single_file_without_a_test_split_leaves_the_hold_out_to_the_engine(root):
    x = np.random.default_rng(0).normal(size=(10, 7))  # float64 features become float32
    np.savez_compressed(root / "feat.npz", x_train=x, y_train=np.arange(10) % 2)
    pool = _load(root, path="feat.npz")
    assert pool.x_test is None and pool.y_test is None
    assert pool.x_train.dtype == torch.float32 and pool.x_train.shape == (10, 7)
    assert np.allclose(pool.x_train.numpy(), x.astype(np.float32))
    assert pool.num_classes == 2


def test_a_folder_gives_one_natural_writer_per_file_and_an_optional_test_file(root):
    folder = root / "clients"
    folder.mkdir()
    sizes = {"alice": 3, "bob": 5, "carol": 2}
    for i, (name, n) in enumerate(sizes.items()):
        x, y = _images(n, i)
        np.savez(folder / f"{name}.npz", x=x, y=y)
    xt, yt = _images(4, 9)
    np.savez(folder / "test.npz", x=xt, y=yt)
    pool = _load(root, path="clients")
    assert pool.writer_names == ["alice", "bob", "carol"]
    assert pool.writer_ids.tolist() == [0] * 3 + [1] * 5 + [2] * 2
    assert len(pool.y_train) == 10 and len(pool.y_test) == 4


def test_custom_keys_and_a_fixed_class_count(root):
    x, y = _images(8, 0, classes=2)
    np.savez(root / "k.npz", images=x, labels=y)
    pool = _load(root, path="k.npz", x_key="images", y_key="labels", num_classes=10)
    assert pool.num_classes == 10 and pool.x_test is None and len(pool.y_train) == 8


@pytest.mark.parametrize("path", ["../outside.npz", "{outside}", "missing.npz", "empty_folder", ""])
def test_paths_outside_the_root_and_missing_ones_get_the_same_message(root, path):
    x, y = _images(4, 0)
    outside = root.parent / "outside.npz"
    np.savez(outside, x_train=x, y_train=y)  # it exists: the answer must not tell
    (root / "empty_folder").mkdir()
    with pytest.raises(SpecError) as e:
        _load(root, path=path.format(outside=outside))
    assert e.value.field == "data.options.path" and e.value.message == WHERE


def test_a_symlink_out_of_the_root_is_refused(root):
    x, y = _images(4, 0)
    np.savez(root.parent / "secret.npz", x_train=x, y_train=y)
    (root / "link.npz").symlink_to(root.parent / "secret.npz")
    with pytest.raises(SpecError, match="inside the server's datasets folder"):
        _load(root, path="link.npz")


def test_a_pickled_object_array_is_refused_without_running_it(root, tmp_path, monkeypatch):
    monkeypatch.setenv("FEDWEB_DATA_DIR", str(root.parent))
    marker = tmp_path / "ran"

    class Boom:
        def __reduce__(self):
            return (Path.touch, (marker,))

    x = np.empty(2, dtype=object)
    x[:] = [Boom(), Boom()]
    np.savez(root / "evil.npz", x_train=x, y_train=np.zeros(2, np.int64))
    with pytest.raises(SpecError, match="Python objects"):
        _load(root, path="evil.npz")
    with pytest.raises(SpecError, match="Python objects"):
        registry.get("dataset", "npz").traits["describe"](
            registry.get("dataset", "npz").options(path="evil.npz"),
            DataContext(test_fraction=0.2, data_root=root, num_clients=2),
        )
    assert not marker.exists()


def test_bad_contents_are_named(root):
    np.savez(root / "short.npz", x_train=np.zeros((4, 3)), y_train=np.zeros(3, np.int64))
    with pytest.raises(SpecError, match="y_train must be 4 integer labels"):
        _load(root, path="short.npz")
    (root / "fake.npz").write_text("not a zip")
    with pytest.raises(SpecError, match="not an .npz file"):
        _load(root, path="fake.npz")
    np.savez(root / "neg.npz", x_train=np.zeros((2, 3)), y_train=np.array([0, -1]))
    with pytest.raises(SpecError, match="negative labels"):
        _load(root, path="neg.npz")


def test_an_oversized_header_is_refused_before_reading(root, monkeypatch):
    from fedweb_engine.data import npz

    x, y = _images(50, 0)
    np.savez(root / "big.npz", x_train=x, y_train=y)
    monkeypatch.setattr(npz, "MAX_BYTES", 100)
    with pytest.raises(SpecError, match="at most 100 bytes"):
        _load(root, path="big.npz")


@pytest.mark.parametrize("layout", ["file", "folder"])
def test_describe_matches_the_loaded_pool(root, monkeypatch, layout):
    monkeypatch.setenv("FEDWEB_DATA_DIR", str(root.parent))
    if layout == "file":
        x, y = _images(12, 0, classes=4)
        np.savez(root / "d.npz", x_train=x, y_train=y, x_test=x[:3], y_test=y[:3])
        path = "d.npz"
    else:
        (root / "d").mkdir()
        for i in range(3):
            x, y = _images(5 + i, i, classes=4)
            np.savez(root / "d" / f"c{i}.npz", x=x, y=y)
        path = "d"
    npz = registry.get("dataset", "npz")
    shape = npz.traits["describe"](
        npz.options(path=path), DataContext(test_fraction=0.2, data_root=root, num_clients=2)
    )
    pool = _load(root, path=path)
    assert shape.input_shape == pool.input_shape
    assert shape.num_classes == pool.num_classes
    assert shape.train_samples == len(pool.y_train)
    assert shape.sample_bytes == pool.x_train[0].numel() * pool.x_train.element_size() + 8


def test_a_spec_in_the_new_shape_selects_npz_with_a_natural_partition(root):
    from fedweb_engine.data import build_data
    from fedweb_engine.spec.schema import Spec

    (root / "clients").mkdir()
    for i in range(3):
        x, y = _images(6, i)
        np.savez(root / "clients" / f"w{i}.npz", x=x, y=y)
    spec = Spec.from_dict(
        {
            "model": {"name": "cnn", "options": {}},
            "data": {"name": "npz", "options": {"path": "clients"}, "num_clients": 3, "partition": "natural"},
            "participation": {"clients_per_round": 2},
        }
    )
    data = build_data(spec.data, 0, data_root=root)
    assert data.writers == ["w0", "w1", "w2"] and data.num_clients == 3
    assert len(data.y_test) > 0  # test_fraction held out: the folder has no test.npz
