"""CIFAR ResNet (He et al. 2016, "Deep Residual Learning for Image Recognition", §4.2).

Depth ``6n + 2``: a 3x3 stem conv, three stages of ``n`` BasicBlocks with
``16k / 32k / 64k`` channels (``k`` = width multiplier), global average pool, linear.
The first block of stages 2 and 3 has stride 2 and a 1x1 conv + norm projection shortcut
(option B of the paper). Choices (docs/science.md §1.4):

- ``norm``: ``batch`` (BatchNorm2d), ``layer`` (GroupNorm(1, C): mean/variance over
  (C, H, W) of each example, per-channel affine), ``rms`` (``RMSNorm2d``: the same
  statistics without centring, per-channel scale, no bias).
- ``placement``: ``branch`` (classic, ``x <- relu(x + Norm(F(x)))``) or ``post``
  (Paper D's post-normalized network, ``x <- Norm(x + F(x))``), where
  ``F = conv -> Norm -> relu -> conv``.
- A block inserted by ``new_block`` is always the plain residual ``z + Norm(F(z))`` with
  the last norm's scale zeroed, so ``h_0 = 0`` and ``f_new == f_old`` at initialization.
- Fractional width: a stage of base width ``c`` has ``max(1, floor(c * k + 1/2))``
  channels (round half up).

``ResNetConfig`` (these rules) and the point names are in the torch-free ``configs.resnet``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .base import ResidualModel
from .configs.resnet import NORMS, PLACEMENTS, ResNetConfig


class RMSNorm2d(nn.Module):
    """``y = x / sqrt(mean_{C,H,W} x² + eps) * γ_c``: RMSNorm over each example's whole map."""

    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))

    def forward(self, x: Tensor) -> Tensor:
        rms_inv = torch.rsqrt(x.pow(2).mean(dim=(1, 2, 3), keepdim=True) + self.eps)  # (B, 1, 1, 1)
        return x * rms_inv * self.weight.view(1, -1, 1, 1)


def make_norm(kind: str, channels: int) -> nn.Module:
    """The ``kind`` norm (``batch`` | ``layer`` | ``rms``) for a ``channels``-channel map."""
    if kind == "batch":
        return nn.BatchNorm2d(channels)
    if kind == "layer":
        return nn.GroupNorm(1, channels)
    if kind == "rms":
        return RMSNorm2d(channels)
    raise ValueError(f"norm {kind!r} is not one of {NORMS}")


def conv3x3(in_channels: int, out_channels: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    """Two 3x3 convs on the stream, ``F(x) = conv2(relu(norm1(conv1(x))))``, combined as

    - ``branch``:   ``relu(s(x) + norm2(F(x)))``  (He et al. 2016)
    - ``post``:     ``norm2(s(x) + F(x))``        (post-norm, Paper D)
    - ``inserted``: ``x + norm2(F(x))``           (a depth-expansion block; no relu after the sum)

    with ``s`` the identity or, when the shape changes, a 1x1 conv + norm projection.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, norm: str, placement: str):
        super().__init__()
        if placement not in (*PLACEMENTS, "inserted"):
            raise ValueError(f"block placement {placement!r} is not one of {(*PLACEMENTS, 'inserted')}")
        self.placement = placement
        self.conv1 = conv3x3(in_channels, out_channels, stride)
        self.norm1 = make_norm(norm, out_channels)
        self.conv2 = conv3x3(out_channels, out_channels)
        self.norm2 = make_norm(norm, out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), make_norm(norm, out_channels)
            )

    def forward(self, x: Tensor) -> Tensor:
        h = self.conv2(F.relu(self.norm1(self.conv1(x))))  # (B, C_out, H/stride, W/stride)
        if self.placement == "post":
            return self.norm2(self.shortcut(x) + h)
        out = self.shortcut(x) + self.norm2(h)
        return F.relu(out) if self.placement == "branch" else out


def init_weights(module: nn.Module) -> None:
    """Kaiming-normal (fan_out, relu) convs (He et al. 2015); norms and linear keep PyTorch's defaults."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


class CifarResNet(ResidualModel):
    """ResNet-(6n+2) on ``(B, in_channels, H, W)`` images; blocks ``stage{s}.block{b}`` (1-based)."""

    family = "resnet"
    last_point_low_rank = True  # a linear classifier on the stream averaged over space

    def __init__(self, config: ResNetConfig):
        c1, c2, c3 = config.channels
        stem = nn.Sequential(conv3x3(config.in_channels, c1), make_norm(config.norm, c1), nn.ReLU())
        blocks, names = [], []
        in_channels = c1
        for s, out_channels in enumerate((c1, c2, c3), start=1):
            for b in range(1, config.blocks_per_stage + 1):
                stride = 2 if s > 1 and b == 1 else 1
                blocks.append(BasicBlock(in_channels, out_channels, stride, config.norm, config.placement))
                names.append(f"stage{s}.block{b}")
                in_channels = out_channels
        head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c3, config.num_classes))
        super().__init__(stem, blocks, names, head)
        init_weights(self)
        self.config = config
        self.spec = {"family": self.family, **asdict(config)}

    def new_block(self, point: str) -> nn.Module:
        """Stride-1 ``z + norm2(F(z))`` block of the stream's width, ``norm2`` scale zeroed: ``h_0 = 0``."""
        channels = self.blocks[self.index(point)].conv2.out_channels
        block = BasicBlock(channels, channels, 1, self.config.norm, "inserted")
        init_weights(block)
        nn.init.zeros_(block.norm2.weight)
        return block.to(next(self.parameters()))  # this model's device and dtype


def build(spec: dict[str, Any]) -> CifarResNet:
    """A CIFAR ResNet from ``spec`` (keys: the fields of ``ResNetConfig`` and ``family``)."""
    return CifarResNet(ResNetConfig(**{k: v for k, v in spec.items() if k != "family"}))
