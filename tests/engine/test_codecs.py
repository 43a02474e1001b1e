"""Codecs: payload sizes, round trips, hand-checked quantisation, top-k and error feedback."""

import math
import struct

import pytest
import torch

from fedweb_engine.communication.codecs import HEADER_BYTES, compress_with_feedback, make_codec
from fedweb_engine.components import registry

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
LAYOUT = [600, 300, 100]  # P = 1000, three tensors
P = sum(LAYOUT)


def _updates(rows: int, device: str = "cpu", seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, P, generator=g).to(device)


@pytest.mark.parametrize("device", DEVICES)
def test_it_round_trips_fp32_bit_exactly(device):
    codec = make_codec("fp32", LAYOUT)
    x = _updates(2, device)

    payload = codec.encode(x)

    assert payload.dtype == torch.uint8 and payload.device.type == device
    assert payload.shape == (2, 4 * P + HEADER_BYTES) and codec.payload_bytes() == 4 * P + HEADER_BYTES
    assert HEADER_BYTES <= 0.01 * 4 * P
    assert torch.equal(codec.decode(payload), x)


def test_it_writes_the_documented_header():
    codec = make_codec("topk", LAYOUT, {"ratio": 0.1})

    data = codec.encode_one(torch.ones(P))

    assert struct.unpack("<2sBBIQ", data[:HEADER_BYTES]) == (b"FW", 1, 4, 100, P)


@pytest.mark.parametrize("device", DEVICES)
def test_it_halves_the_bytes_with_fp16(device):
    codec = make_codec("fp16", LAYOUT)
    x = _updates(2, device)

    decoded = codec.decode(codec.encode(x))

    assert codec.payload_bytes() == 2 * P + HEADER_BYTES
    # fp16 keeps 11 significant bits: relative rounding error at most 2^-11.
    assert torch.all((decoded - x).abs() <= x.abs() * 2**-11 + 1e-7)


def test_it_clamps_fp16_overflow_instead_of_sending_inf():
    codec = make_codec("fp16", [3])

    decoded = codec.decode_one(codec.encode_one(torch.tensor([1e6, -1e6, 1.0])))

    assert decoded.tolist() == [65504.0, -65504.0, 1.0]


def test_it_quantises_int8_as_computed_by_hand():
    # Prepare: tensor 0 spans [0, 255] -> min 0, scale 1; tensor 1 is constant -> scale 0.
    codec = make_codec("int8", [3, 2])
    x = torch.tensor([0.0, 10.4, 255.0, 7.0, 7.0])

    # Execute
    data = codec.encode_one(x)
    decoded = codec.decode_one(data)

    # Assert: 16 header bytes, mins (0, 7), scales (1, 0), then codes 0, 10, 255, 0, 0.
    assert len(data) == HEADER_BYTES + 8 * 2 + 5
    assert struct.unpack("<4f", data[16:32]) == (0.0, 7.0, 1.0, 0.0)
    assert list(data[32:]) == [0, 10, 255, 0, 0]
    assert decoded.tolist() == [0.0, 10.0, 255.0, 7.0, 7.0]


@pytest.mark.parametrize("device", DEVICES)
def test_it_keeps_int8_error_within_half_a_step_per_tensor(device):
    codec = make_codec("int8", LAYOUT)
    x = _updates(3, device)
    x[:, 600:900] *= 100  # tensors of very different ranges get their own scales

    decoded = codec.decode(codec.encode(x))

    assert codec.payload_bytes() == P + 8 * len(LAYOUT) + HEADER_BYTES
    for part_x, part_d in zip(torch.split(x, LAYOUT, 1), torch.split(decoded, LAYOUT, 1), strict=True):
        scale = (part_x.amax(1, keepdim=True) - part_x.amin(1, keepdim=True)) / 255
        assert torch.all((part_d - part_x).abs() <= scale / 2 * (1 + 1e-5))


@pytest.mark.parametrize("device", DEVICES)
def test_it_keeps_exactly_the_largest_magnitudes_with_topk(device):
    codec = make_codec("topk", LAYOUT, {"ratio": 0.01})
    x = torch.linspace(-1, 2, P, device=device)[
        torch.randperm(P, generator=torch.Generator().manual_seed(1)).to(device)
    ]
    x = x.reshape(1, P)

    decoded = codec.decode(codec.encode(x))

    k = math.ceil(0.01 * P)
    assert codec.k == k and codec.payload_bytes() == 8 * k + HEADER_BYTES
    kept = decoded != 0
    assert int(kept.sum()) == k
    assert torch.equal(decoded[kept], x[kept])
    assert x.abs()[kept].min() > x.abs()[~kept].max()


def test_it_keeps_at_least_one_entry_with_topk():
    codec = make_codec("topk", [5], {"ratio": 1e-9})

    decoded = codec.decode_one(codec.encode_one(torch.tensor([0.1, -3.0, 2.0, 0.0, 1.0])))

    assert decoded.tolist() == [0.0, -3.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["fp32", "fp16", "int8", "topk"])
def test_it_encodes_a_group_like_each_row_alone(name):
    codec = make_codec(name, LAYOUT, {"ratio": 0.05} if name == "topk" else None)
    x = _updates(3)

    payload = codec.encode(x)

    rows = [codec.encode(x[i : i + 1]) for i in range(3)]
    assert torch.equal(payload, torch.cat(rows))
    assert torch.equal(codec.decode(payload), torch.cat([codec.decode(r) for r in rows]))


def test_it_carries_exactly_what_topk_dropped_in_the_residual():
    codec = make_codec("topk", [4], {"ratio": 0.25})
    x = torch.tensor([[1.0, -5.0, 2.0, 0.5]])

    _, decoded, residual = compress_with_feedback(codec, x, None)
    _, decoded2, residual2 = compress_with_feedback(codec, x, residual)

    assert decoded.tolist() == [[0.0, -5.0, 0.0, 0.0]]
    assert residual.tolist() == [[1.0, 0.0, 2.0, 0.5]]
    # Second step sends x + residual = [2, -5, 4, 1]; -5 is still the largest.
    assert decoded2.tolist() == [[0.0, -5.0, 0.0, 0.0]]
    assert residual2.tolist() == [[2.0, 0.0, 4.0, 1.0]]


def test_it_tracks_the_sum_of_inputs_with_error_feedback():
    codec = make_codec("topk", LAYOUT, {"ratio": 0.05})
    residual = None
    sent = torch.zeros(2, P)
    total = torch.zeros(2, P)

    for step in range(40):
        x = _updates(2, seed=step)
        _, decoded, residual = compress_with_feedback(codec, x, residual)
        sent += decoded
        total += x

    # Invariant: sum(sent) + residual == sum(inputs); and what is still owed stays bounded.
    assert torch.allclose(sent + residual, total, atol=1e-4)
    assert (sent - total).norm() < 0.5 * total.norm()


def test_it_has_no_residual_for_fp32():
    codec = make_codec("fp32", LAYOUT)
    x = _updates(2)

    _, decoded, residual = compress_with_feedback(codec, x, torch.zeros_like(x))

    assert torch.equal(decoded, x) and not residual.any()


@pytest.mark.parametrize(
    ("offset", "value"),
    [(0, ord("X")), (2, 9), (3, 2), (8, 7)],
    ids=["magic", "version", "codec", "size"],
)
def test_it_rejects_a_corrupted_header(offset, value):
    codec = make_codec("fp32", LAYOUT)
    payload = codec.encode(_updates(2))
    payload[1, offset] = value

    with pytest.raises(ValueError):
        codec.decode(payload)


def test_it_rejects_payloads_of_the_wrong_length_or_codec():
    fp32 = make_codec("fp32", LAYOUT)
    fp16 = make_codec("fp16", LAYOUT)

    with pytest.raises(ValueError, match="bytes"):
        fp32.decode_one(fp32.encode_one(torch.ones(P))[:-1])
    with pytest.raises(ValueError, match="bytes"):
        fp32.decode(fp16.encode(_updates(1)))
    with pytest.raises(ValueError, match="parameters"):
        make_codec("fp32", [P + 1]).decode_one(b"FW" + fp32.encode_one(torch.ones(P))[2:] + b"\0" * 4)


def test_it_rejects_topk_indices_out_of_range():
    codec = make_codec("topk", [10], {"ratio": 0.2})
    payload = codec.encode(torch.ones(1, 10))
    payload[0, HEADER_BYTES : HEADER_BYTES + 4] = torch.tensor([10], dtype=torch.int32).view(torch.uint8)

    with pytest.raises(ValueError, match="malformed"):
        codec.decode(payload)


def test_it_rejects_bad_arguments():
    with pytest.raises(registry.UnknownComponent, match="unknown codec"):
        make_codec("zip", LAYOUT)
    with pytest.raises(ValueError, match="ratio"):
        make_codec("topk", LAYOUT, {"ratio": 0})
    with pytest.raises(ValueError, match="layout"):
        make_codec("fp32", [])
    with pytest.raises(ValueError, match="float32"):
        make_codec("fp32", [2]).encode(torch.ones(1, 2, dtype=torch.float64))
