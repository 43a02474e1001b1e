"""A codec registered by a plugin goes through a whole run: validated options in the spec, its wire
id in every payload header, its real bytes counted, and its decoded updates aggregated."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from fedweb_engine.communication.codecs import Codec, make_codec
from fedweb_engine.components import registry
from fedweb_engine.components.registry import option
from fedweb_engine.simulation.runner import Simulation
from fedweb_engine.spec.schema import Spec, SpecError

SPEC = {
    "seed": 2,
    "rounds": 3,
    "data": {"name": "digits", "options": {"image_size": 8}, "num_clients": 10},
    "model": {"name": "logistic"},
    "participation": {"clients_per_round": 4},
    "compute": {"device": "cpu"},
}


@dataclass(frozen=True)
class SignOptions:
    scale: float = option(0.01, "Magnitude every entry is sent at.", min=0, min_open=True, max=1)


class SignCodec(Codec):
    """signSGD-style: one byte per entry holding its sign, decoded as ±scale (a plugin author's codec)."""

    name = "sign_test"

    def __init__(self, layout, scale: float):
        super().__init__(layout)
        self.scale = scale

    def _data_bytes(self) -> int:
        return self.num_params

    def _encode_data(self, x, out) -> None:
        out.copy_((x >= 0).to(torch.uint8))

    def _decode_data(self, data):
        return (data.float() * 2 - 1) * self.scale


@pytest.fixture
def sign_codec():
    registry.codec("sign_test", SignOptions, codec_id=200)(lambda layout, options: SignCodec(layout, options.scale))
    yield
    registry.unregister("codec", "sign_test")


def test_a_plugin_codec_runs_a_whole_experiment_and_its_bytes_are_counted(sign_codec):
    spec = Spec.from_dict({**SPEC, "communication": {"uplink": {"name": "sign_test", "options": {"scale": 0.05}}}})
    sim = Simulation(spec)
    assert isinstance(sim.uplink, SignCodec) and sim.uplink.scale == 0.05
    start = sim.global_flat.clone()
    result = sim.next_round()
    payload = 16 + sim.num_params  # the 16-byte header, then one byte per parameter
    assert result.bytes_up == payload * result.completed
    # Every client sent ±0.05 per entry, so the weighted mean moves each entry by at most 0.05.
    step = (sim.global_flat - start).abs()
    assert step.max() <= 0.05 + 1e-6 and step.max() > 0
    assert all(r.train_loss is not None for r in [result, sim.next_round(), sim.next_round()])


def test_its_payload_header_names_it_by_its_wire_id(sign_codec):
    codec = make_codec("sign_test", [3, 2], {"scale": 0.5})
    payload = codec.encode(torch.tensor([[1.0, -2.0, 0.0, 3.0, -1.0]]))
    assert payload[0, 3].item() == 200
    assert codec.decode(payload).tolist() == [[0.5, -0.5, 0.5, 0.5, -0.5]]
    with pytest.raises(ValueError, match=r"codec id 200 \(sign_test\)"):
        make_codec("fp16", [3, 2]).decode(torch.cat([payload[:, :16], payload[:, 16:], payload[:, 16:]], 1))


def test_bad_plugin_codec_options_name_the_link_and_the_field(sign_codec):
    with pytest.raises(SpecError, match=r"^communication.downlink.options.scale must be > 0"):
        Spec.from_dict({**SPEC, "communication": {"downlink": {"name": "sign_test", "options": {"scale": 0}}}})
