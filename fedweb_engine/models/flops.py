"""Training FLOPs per sample, for reporting achieved TFLOP/s in benchmarks.

Counted with ``torch.utils.flop_counter.FlopCounterMode`` on a forward pass over meta tensors
(no memory, no compute): it counts 2 FLOPs per multiply-accumulate of matmuls, convolutions and
attention (QKᵀ and AV in full, causal mask or not), and nothing for elementwise ops. Training is
taken as 3 × forward (the backward pass costs about twice the forward).
For ``lm14m`` a "sample" is one sequence, so pass ``input_shape=(T,)``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call
from torch.utils.flop_counter import FlopCounterMode

TRAIN_FACTOR = 3


def flops_per_sample(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    """Training FLOPs (≈ 3 × forward) for one sample of shape ``input_shape`` (no batch dimension)."""
    meta = torch.device("meta")
    params = {name: torch.empty_like(p, device=meta) for name, p in model.named_parameters()}
    params.update({name: torch.empty_like(b, device=meta) for name, b in model.named_buffers()})
    dtype = torch.int64 if getattr(model, "takes_tokens", False) else torch.float32
    x = torch.zeros((1, *input_shape), dtype=dtype, device=meta)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        functional_call(model, params, (x,))
    return TRAIN_FACTOR * counter.get_total_flops()
