"""Communication codecs: the real bytes a client update (or the model) costs on the wire.

A codec turns a group of G flat fp32 vectors ``[G, P]`` into ``[G, L]`` uint8 payloads and back.
Every payload of a codec has the same length ``L = payload_bytes()``, so a whole group encodes
into one tensor that stays on the training device (CPU or CUDA): nothing goes to the host per
client.

Wire format (little-endian), one payload per client::

    offset  size  field
    0       2     magic b"FW"
    2       1     format version (1)
    3       1     codec id (the codec's registered ``codec_id``: fp32=1, fp16=2, int8=3, topk=4)
    4       4     uint32 codec field: 0 (fp32, fp16), number of tensors (int8), k (topk)
    8       8     uint64 P, the number of parameters
    16      ...   data: fp32 -> P float32; fp16 -> P float16;
                  int8 -> T float32 minima, T float32 scales, P uint8 codes;
                  topk -> k int32 indices, k float32 values

The 16-byte header depends only on (codec, layout), so it is built once per codec. Data is the
tensor's memory reinterpreted as bytes (``view(torch.uint8)``), which is little-endian on every
host the engine supports.

Codecs are pure: error feedback lives outside them (:func:`compress_with_feedback`), and the
runner keeps the residual of each client. They register (with their options and codec ids) in
:mod:`fedweb_engine.communication.codec_options`; :func:`make_codec` builds any registered codec.
"""

from __future__ import annotations

import math
import struct
import sys

import torch
from torch import Tensor

from fedweb_engine.components import registry
from fedweb_engine.spec.validation import build

MAGIC = b"FW"
VERSION = 1
HEADER_BYTES = 16
_HEADER = struct.Struct("<2sBBIQ")
_FP16_MAX = 65504.0


class Codec:
    """Encode ``[G, P]`` fp32 groups into ``[G, L]`` uint8 payloads and back (see module doc)."""

    name: str = ""  # the registered name: the wire header's codec byte is its ``codec_id`` trait

    def __init__(self, layout: list[int]):
        if not layout or any(int(n) < 1 for n in layout):
            raise ValueError("layout must be a non-empty list of positive tensor sizes")
        self.layout = [int(n) for n in layout]
        self.num_params = sum(self.layout)
        self.codec_id = registry.get("codec", self.name).traits["codec_id"]
        self.header = _build_header(self.codec_id, self._header_field(), self.num_params)
        self._headers_by_device: dict[torch.device, Tensor] = {}

    # -- public API ---------------------------------------------------------------------------

    def payload_bytes(self) -> int:
        """L, the length in bytes of one client's payload."""
        return HEADER_BYTES + self._data_bytes()

    def encode(self, x: Tensor, *, out: Tensor | None = None) -> Tensor:
        """Encode ``x`` ``[G, P]`` float32 into ``[G, L]`` uint8 payloads on ``x``'s device.

        ``out`` (a preallocated ``[G, L]`` uint8 tensor) receives the payloads instead of a new
        tensor: large fresh allocations cost page faults on every round.
        """
        self._check_input(x)
        if out is None:
            out = torch.empty(x.shape[0], self.payload_bytes(), dtype=torch.uint8, device=x.device)
        out[:, :HEADER_BYTES] = self._header_on(x.device)
        self._encode_data(x, out[:, HEADER_BYTES:])
        return out

    def decode(self, payload: Tensor, *, check: bool = True, out: Tensor | None = None) -> Tensor:
        """Decode ``[G, L]`` uint8 payloads into fresh ``[G, P]`` float32 tensors.

        Raises ``ValueError`` on a wrong shape, magic, version, codec or size. The header check
        costs one device-to-host sync per group (not per client); ``check=False`` skips it for
        payloads this process has just encoded itself.
        """
        self._check_payload_shape(payload)
        if check:
            self._check_payload_content(payload)
        if out is not None and self.name == "fp32":
            return out.copy_(payload[:, HEADER_BYTES:].view(torch.float32))  # straight into ``out``
        decoded = self._decode_data(payload[:, HEADER_BYTES:])
        return decoded if out is None else out.copy_(decoded)

    def encode_one(self, x: Tensor) -> bytes:
        """Encode one flat vector ``[P]`` into bytes (host side: the wire format, as the tests check it)."""
        return self.encode(x.reshape(1, -1)).cpu().numpy().tobytes()

    def decode_one(self, data: bytes) -> Tensor:
        """Decode the bytes of one payload into a flat ``[P]`` float32 CPU tensor."""
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        return self.decode(payload.reshape(1, -1))[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(P={self.num_params}, L={self.payload_bytes()})"

    # -- per-codec parts ----------------------------------------------------------------------

    def _header_field(self) -> int:
        return 0

    def _data_bytes(self) -> int:
        raise NotImplementedError

    def _encode_data(self, x: Tensor, out: Tensor) -> None:
        raise NotImplementedError

    def _decode_data(self, data: Tensor) -> Tensor:
        raise NotImplementedError

    def _check_data(self, data: Tensor) -> Tensor | None:
        """A scalar bool tensor, True when the data part is malformed (None: nothing to check)."""
        return None

    # -- helpers ------------------------------------------------------------------------------

    def _header_on(self, device: torch.device) -> Tensor:
        # One copy per device, made once: encoding a group then only writes on the device.
        if device not in self._headers_by_device:
            self._headers_by_device[device] = self.header.to(device)
        return self._headers_by_device[device]

    def _check_input(self, x: Tensor) -> None:
        if x.dim() != 2 or x.shape[1] != self.num_params:
            raise ValueError(f"{self.name}: expected a [G, {self.num_params}] tensor, got {list(x.shape)}")
        if x.dtype != torch.float32:
            raise ValueError(f"{self.name}: expected float32, got {x.dtype}")

    def _check_payload_shape(self, payload: Tensor) -> None:
        if payload.dtype != torch.uint8 or payload.dim() != 2:
            raise ValueError(
                f"{self.name}: payload must be a [G, L] uint8 tensor, got {payload.dtype} {list(payload.shape)}"
            )
        if payload.shape[1] != self.payload_bytes():
            raise ValueError(f"{self.name}: payload is {payload.shape[1]} bytes, expected {self.payload_bytes()}")

    def _check_payload_content(self, payload: Tensor) -> None:
        bad = (payload[:, :HEADER_BYTES] != self._header_on(payload.device)).any()
        data_bad = self._check_data(payload[:, HEADER_BYTES:])
        if data_bad is not None:
            bad = bad | data_bad
        if bool(bad):  # the one sync of the group; the slow path below only runs on errors
            raise ValueError(self._explain_bad_payload(payload))

    def _explain_bad_payload(self, payload: Tensor) -> str:
        for row in payload[:, :HEADER_BYTES].cpu():
            magic, version, codec_id, field, num_params = _HEADER.unpack(row.numpy().tobytes())
            if magic != MAGIC:
                return f"{self.name}: bad magic {magic!r}, not a FedWeb payload"
            if version != VERSION:
                return f"{self.name}: unsupported format version {version}"
            if codec_id != self.codec_id:
                other = codec_named_by(codec_id)
                return f"{self.name}: payload was encoded with codec id {codec_id} ({other or 'unknown codec'})"
            if num_params != self.num_params:
                return f"{self.name}: payload has {num_params} parameters, expected {self.num_params}"
            if field != self._header_field():
                return f"{self.name}: payload header field is {field}, expected {self._header_field()}"
        return f"{self.name}: payload data is malformed"


class Fp32Codec(Codec):
    """Raw float32: decode(encode(x)) is bit-exact."""

    name = "fp32"

    def _data_bytes(self) -> int:
        return 4 * self.num_params

    def _encode_data(self, x: Tensor, out: Tensor) -> None:
        _write(out, x)

    def _decode_data(self, data: Tensor) -> Tensor:
        return _as_dtype(data, torch.float32)


class Fp16Codec(Codec):
    """Half precision; values beyond fp16's range are clamped so one outlier cannot become inf."""

    name = "fp16"

    def _data_bytes(self) -> int:
        return 2 * self.num_params

    def _encode_data(self, x: Tensor, out: Tensor) -> None:
        _write(out, x.to(torch.float16).clamp_(-_FP16_MAX, _FP16_MAX))

    def _decode_data(self, data: Tensor) -> Tensor:
        return _as_dtype(data, torch.float16).float()


class Int8Codec(Codec):
    """Per-tensor affine quantisation to 256 levels: x ≈ min + q·scale, q in [0, 255].

    ``scale = (max − min) / 255`` per tensor of the layout, so the decode error is at most
    scale/2 per entry. A constant tensor gets scale 0 and decodes exactly to its value.
    """

    name = "int8"

    def __init__(self, layout: list[int]):
        super().__init__(layout)
        self._sizes_by_device: dict[torch.device, Tensor] = {}

    def _header_field(self) -> int:
        return len(self.layout)

    def _data_bytes(self) -> int:
        return 8 * len(self.layout) + self.num_params

    def _encode_data(self, x: Tensor, out: Tensor) -> None:
        num_tensors = len(self.layout)
        lo, hi = self._per_tensor_min_max(x)
        scale = (hi - lo) / 255.0
        # A constant tensor (scale 0) divides by 1 instead: its codes are all 0, decoding to lo.
        safe = torch.where(scale > 0, scale, torch.ones_like(scale))
        codes = (x - self._expand(lo)).div_(self._expand(safe)).round_().clamp_(0, 255)
        _write(out[:, : 4 * num_tensors], lo)
        _write(out[:, 4 * num_tensors : 8 * num_tensors], scale)
        out[:, 8 * num_tensors :] = codes.to(torch.uint8)

    def _decode_data(self, data: Tensor) -> Tensor:
        num_tensors = len(self.layout)
        lo = _as_dtype(data[:, : 4 * num_tensors], torch.float32)
        scale = _as_dtype(data[:, 4 * num_tensors : 8 * num_tensors], torch.float32)
        codes = data[:, 8 * num_tensors :].float()
        return codes.mul_(self._expand(scale)).add_(self._expand(lo))

    def _per_tensor_min_max(self, x: Tensor) -> tuple[Tensor, Tensor]:
        # One aminmax per tensor of the layout: a few kernel launches, no host sync.
        pairs = [part.aminmax(dim=1) for part in torch.split(x, self.layout, dim=1)]
        lo = torch.stack([p.min for p in pairs], dim=1)
        hi = torch.stack([p.max for p in pairs], dim=1)
        return lo.contiguous(), hi.contiguous()

    def _expand(self, per_tensor: Tensor) -> Tensor:
        """[G, T] -> [G, P]: each tensor's value repeated over its entries."""
        sizes = self._sizes_on(per_tensor.device)
        # output_size keeps repeat_interleave from syncing with the host to size its result.
        return torch.repeat_interleave(per_tensor, sizes, dim=1, output_size=self.num_params)

    def _sizes_on(self, device: torch.device) -> Tensor:
        if device not in self._sizes_by_device:
            self._sizes_by_device[device] = torch.tensor(self.layout, dtype=torch.int64, device=device)
        return self._sizes_by_device[device]


class TopKCodec(Codec):
    """Keep the k entries of largest magnitude over the whole flat vector; the rest decode to 0.

    ``k = max(1, ceil(ratio · P))``; the payload holds k int32 indices then k float32 values.
    """

    name = "topk"

    def __init__(self, layout: list[int], ratio: float):
        if not 0 < ratio <= 1:
            raise ValueError(f"topk ratio must be in (0, 1], not {ratio}")
        num_params = sum(int(n) for n in layout)
        self.k = min(num_params, max(1, math.ceil(ratio * num_params)))
        super().__init__(layout)

    def _header_field(self) -> int:
        return self.k

    def _data_bytes(self) -> int:
        return 8 * self.k

    def _encode_data(self, x: Tensor, out: Tensor) -> None:
        index = x.abs().topk(self.k, dim=1, sorted=False).indices
        values = x.gather(1, index)
        _write(out[:, : 4 * self.k], index.to(torch.int32))
        _write(out[:, 4 * self.k :], values)

    def _decode_data(self, data: Tensor) -> Tensor:
        index = _as_dtype(data[:, : 4 * self.k], torch.int32).long()
        values = _as_dtype(data[:, 4 * self.k :], torch.float32)
        dense = torch.zeros(data.shape[0], self.num_params, dtype=torch.float32, device=data.device)
        return dense.scatter_(1, index, values)

    def _check_data(self, data: Tensor) -> Tensor:
        # An index out of range would crash scatter_ (a device assert on CUDA): reject it here.
        index = _as_dtype(data[:, : 4 * self.k], torch.int32)
        return ((index < 0) | (index >= self.num_params)).any()


def make_codec(name: str, layout: list[int], options=None) -> Codec:
    """The registered codec ``name`` for a model whose tensors have ``layout`` sizes; ``options``
    is its options dataclass (or a dict of them; None: the defaults)."""
    if sys.byteorder != "little":
        raise RuntimeError("FedWeb payloads are little-endian; this host is big-endian")
    component = registry.get("codec", name)
    if options is None or isinstance(options, dict):
        options = build(component.options, options or {}, bounds=True, prefix="options.")
    return component.factory(list(layout), options)


def codec_named_by(codec_id: int) -> str | None:
    """The registered codec whose wire id is ``codec_id`` (None when no codec has it)."""
    return next((c.name for c in registry.components("codec") if c.traits.get("codec_id") == codec_id), None)


def compress_with_feedback(codec: Codec, x: Tensor, residual: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Encode ``x + residual`` and return ``(payload, decoded, new_residual)``.

    Error feedback (Seide et al. 2014; Karimireddy et al. 2019): what the codec dropped this time,
    ``new_residual = (x + residual) − decoded``, is added to the client's next update, so over many
    rounds nothing is lost, only delayed. Pure: the caller keeps the residual per client.
    """
    corrected = x if residual is None else x + residual
    payload = codec.encode(corrected)
    decoded = codec.decode(payload, check=False)  # we made it: no need to sync for a header check
    return payload, decoded, corrected - decoded


def _build_header(codec_id: int, field: int, num_params: int) -> Tensor:
    raw = _HEADER.pack(MAGIC, VERSION, codec_id, field, num_params)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone()


def _as_dtype(data: Tensor, dtype: torch.dtype) -> Tensor:
    """Reinterpret a [G, n] uint8 slice as ``dtype``, in a fresh contiguous tensor.

    The result never aliases the payload. Where the slice is aligned for ``dtype`` (the header is
    16 bytes and every section a whole number of elements, so it normally is) the copy moves whole
    elements; a byte-wise strided copy is several times slower on a CPU.
    """
    try:
        return data.view(dtype).clone(memory_format=torch.contiguous_format)
    except RuntimeError:
        return data.clone(memory_format=torch.contiguous_format).view(dtype)


def _write(out: Tensor, values: Tensor) -> None:
    """Store ``values`` [G, m] into the uint8 slice ``out`` [G, m · itemsize] as raw bytes."""
    try:
        out.view(values.dtype).copy_(values)
    except RuntimeError:  # unaligned slice: fall back to copying bytes
        out.copy_(values.contiguous().view(torch.uint8))
