"""A randomly initialised causal transformer LM with pythia-14m's dimensions and GPT-NeoX layout.

vocab 50,304, d_model 128, 6 layers, 4 heads (head dim 32), MLP 512 with exact GELU, LayerNorm,
untied input/output embeddings, parallel residual (``x + attn(ln1(x)) + mlp(ln2(x))``) and rotary
position embeddings on the first 25% of each head's dimensions (base 10,000), as in pythia.
14,067,712 parameters, the same as pythia-14m. Nothing is downloaded.
"""

from __future__ import annotations

import torch
from torch import nn

from fedweb_engine.components import registry

VOCAB = 50_304
D_MODEL = 128
LAYERS = 6
HEADS = 4
D_MLP = 512
ROTARY_DIMS = (D_MODEL // HEADS) // 4


def _rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotate the first ROTARY_DIMS features of x [B, H, T, Dh] by position (NeoX rotate-half form)."""
    t = x.shape[-2]
    inv_freq = 1.0 / (10_000 ** (torch.arange(0, ROTARY_DIMS, 2, device=x.device, dtype=torch.float32) / ROTARY_DIMS))
    angles = torch.outer(torch.arange(t, device=x.device, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    rot, rest = x[..., :ROTARY_DIMS], x[..., ROTARY_DIMS:]
    half = ROTARY_DIMS // 2
    rotated = torch.cat((-rot[..., half:], rot[..., :half]), dim=-1)
    return torch.cat((rot * cos + rotated * sin, rest), dim=-1)


class Attention(nn.Module):
    """Causal multi-head self-attention: fused qkv projection with bias, rotary, attention, output projection."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.out = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, D_MODEL // HEADS).permute(2, 0, 3, 1, 4).unbind(0)
        y = causal_attention(_rotary(q), _rotary(k), v)
        return self.out(y.transpose(1, 2).reshape(b, t, D_MODEL))


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ / √d + causal mask) v, written out.

    Not ``F.scaled_dot_product_attention``: torch.func has no batching rule for its fused
    backward, so ``vmap(grad(...))`` would run it once per client in a Python loop, and the
    vectorised client training would be a sequential one in disguise. Written out, every op has
    a batching rule; at this model's sizes (head dim 32, short sequences) the [T, T] scores are
    small, and the results equal SDPA's to float rounding (tests/engine/test_lm_attention.py).
    """
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(dim=-1) @ v


class Layer(nn.Module):
    """One GPT-NeoX layer with parallel attention and MLP branches."""

    def __init__(self):
        super().__init__()
        self.ln_attn = nn.LayerNorm(D_MODEL)
        self.ln_mlp = nn.LayerNorm(D_MODEL)
        self.attn = Attention()
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, D_MLP), nn.GELU(), nn.Linear(D_MLP, D_MODEL))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.attn(self.ln_attn(x)) + self.mlp(self.ln_mlp(x))


class LM14M(nn.Module):
    """Token ids [B, T] (int64, T ≤ the spec's data.seq_len bound) → next-token logits [B, T, 50304]."""

    vmappable = True
    takes_tokens = True  # input is int64 token ids, not float features

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
        self.ln_final = nn.LayerNorm(D_MODEL)
        self.unembed = nn.Linear(D_MODEL, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for layer in self.layers:
            x = layer(x)
        return self.unembed(self.ln_final(x))

    def init_parameters(self, generator: torch.Generator | None = None) -> None:
        # GPT-NeoX / HF's init: N(0, 0.02) weights, zero biases, identity LayerNorms.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02, generator=generator)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)


@registry.model("lm14m", task="lm", vmappable=True)
def lm14m(input_shape: tuple[int, ...], num_classes: int, options) -> LM14M:
    """A pythia-14m-sized transformer; its shape and vocabulary are fixed by the architecture."""
    return LM14M()
