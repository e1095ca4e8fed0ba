"""The llama decoder's config (``models.llama``): d_model, layers, heads of ``head_dim``, the
SwiGLU hidden size and the rotary base."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class LlamaConfig:
    width: int = 256  # d_model
    depth: int = 4  # n_layer
    head_dim: int = 64  # n_head = width // head_dim
    vocab_size: int = 256  # bytes
    block_size: int = 256  # longest sequence T (rotary tables are built for it)
    mlp_hidden: int | None = None  # SwiGLU hidden size; None = 8/3 · width rounded up to a multiple of 32
    tie_embeddings: bool = False  # lm_head shares the token embedding matrix
    rope_base: float = 10000.0  # rotary frequency base θ

    def __post_init__(self) -> None:
        for key in ("width", "depth", "head_dim", "vocab_size", "block_size"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"llama {key} must be an integer >= 1, got {getattr(self, key)!r}")
        if self.head_dim % 2:
            raise ValueError(f"llama head_dim must be even for rotary embeddings, got {self.head_dim}")
        if self.width % self.head_dim:
            raise ValueError(
                f"llama width {self.width} is not a multiple of head_dim {self.head_dim}; "
                f"allowed widths: multiples of {self.head_dim}"
            )
        if self.mlp_hidden is None:
            self.mlp_hidden = 32 * math.ceil(8 * self.width / 3 / 32)
        if not isinstance(self.mlp_hidden, int) or self.mlp_hidden < 1:
            raise ValueError(f"llama mlp_hidden must be an integer >= 1 or None, got {self.mlp_hidden!r}")

    @property
    def n_head(self) -> int:
        return self.width // self.head_dim


def point_names(depth: int) -> tuple[str, ...]:
    """``layer.{i}`` (0-based): one point after each layer."""
    return tuple(f"layer.{i}" for i in range(depth))


def agreeing(model: dict) -> dict:
    """The width under which the model keys ``model`` alone are judged: a multiple of their ``head_dim``."""
    return {"width": model.get("head_dim", LlamaConfig.head_dim)}
