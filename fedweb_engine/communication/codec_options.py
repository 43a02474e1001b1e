"""The built-in codecs' factories: ``fn(layout, options) -> Codec``, as a plugin's codec has.

Kept beside :mod:`fedweb_engine.communication.codecs` (the wire format and the codec classes) so that
file stays about the bytes. They are registered, with their options and wire ids, in the catalogue
of built-ins (:mod:`fedweb_engine.components.builtins`), which names them without importing torch.
"""

from __future__ import annotations

from fedweb_engine.communication.codecs import Fp16Codec, Fp32Codec, Int8Codec, TopKCodec
from fedweb_engine.components.builtin_options import TopKOptions


def fp32(layout: list[int], options) -> Fp32Codec:
    """Raw float32: bit-exact."""
    return Fp32Codec(layout)


def fp16(layout: list[int], options) -> Fp16Codec:
    """float16, saturated at ±65504: half the bytes."""
    return Fp16Codec(layout)


def int8(layout: list[int], options) -> Int8Codec:
    """Per-tensor min/max quantisation to 8 bits: a quarter of the bytes."""
    return Int8Codec(layout)


def topk(layout: list[int], options: TopKOptions) -> TopKCodec:
    """The largest-magnitude share ``ratio`` of the entries, as indices and values."""
    return TopKCodec(layout, options.ratio)
