"""What a dataset will look like, from its spec alone, through the registered ``describe``.

Built-in datasets describe themselves beside their loaders (no file is opened, nothing is
generated). A plugin dataset registered without ``describe`` is loaded once to find out (cached
by its section), which is what the contract promises.
"""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache

import numpy as np

from fedweb_engine.components import registry
from fedweb_engine.components.registry import DatasetShape
from fedweb_engine.data import context_of, load_pool
from fedweb_engine.spec.schema import DataSpec, SpecError
from fedweb_engine.spec.validation import build


def describe(data: DataSpec) -> DatasetShape:
    """The shape, classes, training rows and bytes per sample of ``data``'s dataset."""
    component = registry.get("dataset", data.name)
    fn = component.traits.get("describe")
    try:
        if fn is None:
            section = json.dumps(dataclasses.asdict(data), sort_keys=True, default=str)
            return _loaded_shape(section)
        if component.traits.get("context"):
            return fn(data.options, context_of(data))
        return fn(data.options)
    except SpecError:
        raise
    except Exception as e:  # a plugin's own code: its failure is the spec's dataset, not a crash
        raise SpecError("data.name", f"{data.name} could not be read: {type(e).__name__}: {e}") from None


@lru_cache(maxsize=32)
def _loaded_shape(section: str) -> DatasetShape:
    data = build(DataSpec, json.loads(section), bounds=False)
    pool = load_pool(data, np.random.default_rng(0))
    sample = pool.x_train[:1]
    per_sample = sample.element_size() * sample[0].numel() + pool.y_train[:1].element_size() * max(
        1, pool.y_train[0].numel()
    )
    return DatasetShape(tuple(pool.input_shape), pool.num_classes, len(pool.y_train), per_sample)


def input_shape_of(data: DataSpec) -> tuple[tuple[int, ...], int]:
    """(shape of one sample, classes) of the dataset; for tokens, (sequence length, vocabulary)."""
    shape = describe(data)
    return tuple(shape.input_shape), shape.num_classes


def dataset_bytes(data: DataSpec) -> int:
    """Memory of the loaded dataset, training rows and the held-out test set (its tensors, not the
    loader's transient working memory)."""
    shape = describe(data)
    total = shape.train_samples / (1.0 - data.test_fraction)  # the test set is test_fraction of all
    return round(total * shape.sample_bytes)
