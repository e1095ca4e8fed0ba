"""LLaMA-style pre-norm decoder on bytes (Touvron et al. 2023, "LLaMA"; layout of nanoGPT's model.py).

``x <- x + Attn(RMSNorm(x)); x <- x + MLP(RMSNorm(x))`` with RMSNorm (Zhang & Sennrich 2019),
rotary position embeddings (Su et al. 2021, "RoFormer"; the rotate-half layout of LLaMA),
a SwiGLU MLP (Shazeer 2020) and causal ``F.scaled_dot_product_attention``. No biases.
Init as nanoGPT: weights N(0, 0.02), residual output projections N(0, 0.02 / sqrt(2 n_layer)).

Insertion points ``layer.{i}`` (0-based) are the (B, T, d) residual stream after block i;
``new_block`` returns a block whose attention output and MLP down projections are zero, so
its output equals its input. ``LlamaConfig`` and the point names are in the torch-free
``configs.llama``.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import LanguageModel
from .configs.llama import LlamaConfig


class RMSNorm(nn.Module):
    """``y = x / sqrt(mean_d x² + eps) * γ``."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, (x.size(-1),), self.weight, self.eps)


class Rotary(nn.Module):
    """Rotate pairs ``(x_i, x_{i+hs/2})`` of each head by angle ``t · θ^(-2i/hs)`` at position t.

    cos/sin tables for positions ``0 .. block_size-1`` are built once (non-persistent buffers)
    and sliced to the input's T, so attention is a function of the stream alone.
    """

    def __init__(self, head_dim: int, block_size: int, base: float):
        super().__init__()
        inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # (hs/2,)
        angles = torch.outer(torch.arange(block_size, dtype=torch.float64), inv_freq)  # (block_size, hs/2)
        self.register_buffer("cos", angles.cos().float(), persistent=False)
        self.register_buffer("sin", angles.sin().float(), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        T = x.size(-2)
        if T > self.cos.size(0):
            raise ValueError(f"sequence length {T} exceeds block_size {self.cos.size(0)}")
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)  # (T, hs/2)
        x1, x2 = x.chunk(2, dim=-1)  # (B, nh, T, hs/2) each
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.width, 3 * config.width, bias=False)
        self.proj = nn.Linear(config.width, config.width, bias=False)
        self.rotary = Rotary(config.head_dim, config.block_size, config.rope_base)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))  # (B, nh, T, hs)
        y = F.scaled_dot_product_attention(self.rotary(q), self.rotary(k), v, is_causal=True)  # (B, nh, T, hs)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))  # (B, T, C)


class MLP(nn.Module):
    """SwiGLU: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.gate = nn.Linear(config.width, config.mlp_hidden, bias=False)
        self.up = nn.Linear(config.width, config.mlp_hidden, bias=False)
        self.down = nn.Linear(config.mlp_hidden, config.width, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """``x + Attn(RMSNorm(x))``, then ``+ MLP(RMSNorm(·))``; (B, T, d) -> (B, T, d)."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.attn_norm = RMSNorm(config.width)
        self.attn = CausalSelfAttention(config)
        self.mlp_norm = RMSNorm(config.width)
        self.mlp = MLP(config)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class Head(nn.Module):
    """Final RMSNorm and the vocabulary projection: (B, T, d) -> (B, T, V) logits."""

    def __init__(self, config: LlamaConfig):
        super().__init__()
        self.norm = RMSNorm(config.width)
        self.lm_head = nn.Linear(config.width, config.vocab_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.lm_head(self.norm(x))


def init_weights(module: nn.Module, n_layer: int) -> None:
    """N(0, 0.02) linear and embedding weights; attention ``proj`` and MLP ``down`` N(0, 0.02/sqrt(2 n_layer))."""
    for name, m in module.named_modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            residual = name.endswith(("attn.proj", "mlp.down"))
            nn.init.normal_(m.weight, mean=0.0, std=0.02 / math.sqrt(2 * n_layer) if residual else 0.02)


class Llama(LanguageModel):
    """Pre-norm decoder on ``(B, T)`` int64 token ids, returning ``(B, T, V)`` logits."""

    family = "llama"

    def __init__(self, config: LlamaConfig):
        stem = nn.Embedding(config.vocab_size, config.width)
        blocks = [Block(config) for _ in range(config.depth)]
        head = Head(config)
        super().__init__(stem, blocks, [f"layer.{i}" for i in range(config.depth)], head)
        init_weights(self, config.depth)
        if config.tie_embeddings:
            self.head.lm_head.weight = self.stem.weight
        self.config = config
        self.block_size = config.block_size  # sequence length of one example (LanguageModel)
        self.spec = {"family": self.family, **asdict(config)}

    def new_block(self, point: str) -> Block:
        """A ``Block`` with zero ``attn.proj`` and ``mlp.down``: output == input at init."""
        self.index(point)  # refuse unknown points
        block = Block(self.config)
        init_weights(block, self.config.depth)
        nn.init.zeros_(block.attn.proj.weight)
        nn.init.zeros_(block.mlp.down.weight)
        return block.to(next(self.parameters()))  # this model's device and dtype


def build(spec: dict[str, Any]) -> Llama:
    """A llama decoder from ``spec`` (keys: the fields of ``LlamaConfig`` and ``family``)."""
    return Llama(LlamaConfig(**{k: v for k, v in spec.items() if k != "family"}))
