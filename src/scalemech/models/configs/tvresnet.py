"""The ImageNet ResNet's config (``models.tvresnet``): torchvision's depths and stage layouts, and a
width multiplier ``k`` on every channel count (each ``max(1, floor(c * k + 1/2))``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

# Depth -> (torchvision's block: "basic" BasicBlock | "bottleneck" Bottleneck, blocks per stage).
STAGE_BLOCKS: dict[int, tuple[str, tuple[int, ...]]] = {
    18: ("basic", (2, 2, 2, 2)),
    34: ("basic", (3, 4, 6, 3)),
    50: ("bottleneck", (3, 4, 6, 3)),
    101: ("bottleneck", (3, 4, 23, 3)),
    152: ("bottleneck", (3, 8, 36, 3)),
}
STAGE_PLANES = (64, 128, 256, 512)


@dataclass
class TVResNetConfig:
    depth: int = 18  # 18 | 34 | 50 | 101 | 152
    width: float = 1.0  # channel multiplier k on every stage (1 = torchvision's model)
    in_channels: int = 3
    num_classes: int = 1000

    def __post_init__(self) -> None:
        if self.depth not in STAGE_BLOCKS:
            raise ValueError(f"tvresnet depth must be one of {sorted(STAGE_BLOCKS)}, got {self.depth!r}")
        if not isinstance(self.width, (int, float)) or not self.width > 0:
            raise ValueError(f"tvresnet width multiplier must be a number > 0, got {self.width!r}")
        for key in ("in_channels", "num_classes"):
            if not isinstance(getattr(self, key), int) or getattr(self, key) < 1:
                raise ValueError(f"tvresnet {key} must be an integer >= 1, got {getattr(self, key)!r}")

    def scaled(self, channels: int) -> int:
        """``max(1, round_half_up(channels * k))``."""
        return max(1, math.floor(channels * self.width + 0.5))


def point_names(depth: int) -> tuple[str, ...]:
    """``layer{i}.block{j}`` (``i`` 1-based, ``j`` 0-based, as torchvision's ``layer{i}[j]``):
    one point after each block of the four stages."""
    TVResNetConfig(depth=depth)  # refuses a depth torchvision has no layout for
    counts = STAGE_BLOCKS[depth][1]
    return tuple(f"layer{i}.block{j}" for i, blocks in enumerate(counts, start=1) for j in range(blocks))


def narrowest_stage(width: float) -> tuple[int, int]:
    """``(base, channels)`` of the first, narrowest stage at ``width`` (the config checks keep 2 channels)."""
    return STAGE_PLANES[0], TVResNetConfig(width=width).scaled(STAGE_PLANES[0])
