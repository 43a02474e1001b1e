"""The built-in codecs as registered components: their options and wire ids.

Kept beside :mod:`fedweb_engine.communication.codecs` (the wire format and the codec classes) so that file
stays about the bytes; registered with ``@registry.codec`` exactly as a plugin's codec would be.
"""

from __future__ import annotations

from dataclasses import dataclass

from fedweb_engine.communication.codecs import Fp16Codec, Fp32Codec, Int8Codec, TopKCodec
from fedweb_engine.components import registry
from fedweb_engine.components.registry import option


@registry.codec("fp32", codec_id=1)
def fp32(layout: list[int], options) -> Fp32Codec:
    """Raw float32: bit-exact."""
    return Fp32Codec(layout)


@registry.codec("fp16", codec_id=2)
def fp16(layout: list[int], options) -> Fp16Codec:
    """float16, saturated at ±65504: half the bytes."""
    return Fp16Codec(layout)


@registry.codec("int8", codec_id=3)
def int8(layout: list[int], options) -> Int8Codec:
    """Per-tensor min/max quantisation to 8 bits: a quarter of the bytes."""
    return Int8Codec(layout)


@dataclass(frozen=True)
class TopKOptions:
    ratio: float = option(0.01, "Share of entries kept by top-k.", min=0, max=1, min_open=True)


@registry.codec("topk", TopKOptions, codec_id=4)
def topk(layout: list[int], options: TopKOptions) -> TopKCodec:
    """The largest-magnitude share ``ratio`` of the entries, as indices and values."""
    return TopKCodec(layout, options.ratio)
