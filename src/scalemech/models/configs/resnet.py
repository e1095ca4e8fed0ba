"""The CIFAR ResNet's config (``models.resnet``): depth ``6n + 2``, stage widths ``16k / 32k / 64k``
(``k`` = width multiplier, each ``max(1, floor(c * k + 1/2))``), the norm and its placement."""

from __future__ import annotations

import math
from dataclasses import dataclass

NORMS = ("batch", "layer", "rms")
PLACEMENTS = ("branch", "post")
STAGE_CHANNELS = (16, 32, 64)


@dataclass
class ResNetConfig:
    depth: int = 20  # 6n + 2: n BasicBlocks per stage
    width: float = 1.0  # channel multiplier k (16k, 32k, 64k)
    norm: str = "batch"  # batch | layer | rms
    placement: str = "branch"  # branch: relu(x + Norm(F(x))); post: Norm(x + F(x))
    in_channels: int = 3  # 1 for MNIST, 3 for CIFAR
    num_classes: int = 10

    def __post_init__(self) -> None:
        if not isinstance(self.depth, int) or self.depth < 8 or (self.depth - 2) % 6:
            raise ValueError(
                f"resnet depth must be 6n+2 with n >= 1 (8, 14, 20, 32, 44, 56, 110, ...), got {self.depth!r}"
            )
        if not isinstance(self.width, (int, float)) or not self.width > 0:
            raise ValueError(f"resnet width multiplier must be a number > 0, got {self.width!r}")
        if self.norm not in NORMS:
            raise ValueError(f"resnet norm {self.norm!r} is not one of {NORMS}")
        if self.placement not in PLACEMENTS:
            raise ValueError(f"resnet placement {self.placement!r} is not one of {PLACEMENTS}")
        for key in ("in_channels", "num_classes"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"resnet {key} must be an integer >= 1, got {getattr(self, key)!r}")

    @property
    def blocks_per_stage(self) -> int:
        return (self.depth - 2) // 6

    @property
    def channels(self) -> tuple[int, ...]:
        """Stage widths ``max(1, round_half_up(c * k))`` for c in 16, 32, 64."""
        return tuple(max(1, math.floor(c * self.width + 0.5)) for c in STAGE_CHANNELS)


def point_names(depth: int) -> tuple[str, ...]:
    """``stage{s}.block{b}`` (both 1-based): one point after each block of the three stages."""
    blocks = ResNetConfig(depth=depth).blocks_per_stage
    return tuple(f"stage{s}.block{b}" for s in range(1, len(STAGE_CHANNELS) + 1) for b in range(1, blocks + 1))


def narrowest_stage(width: float) -> tuple[int, int]:
    """``(base, channels)`` of the first, narrowest stage at ``width`` (the config checks keep 2 channels)."""
    return STAGE_CHANNELS[0], min(ResNetConfig(width=width).channels)
