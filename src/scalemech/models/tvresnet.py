"""ImageNet ResNet-18/34/50/101/152 built from torchvision's blocks, with a width multiplier.

Mirrors ``torchvision.models.resnet.ResNet`` (He et al. 2016, "Deep Residual Learning for
Image Recognition"; torchvision's v1.5 Bottleneck with the stride on the 3x3 conv) using
its ``BasicBlock`` / ``Bottleneck`` classes and initialization, so at ``width=1`` the
layers equal ``torchvision.models.resnet{depth}()``'s and its state dict loads through
``torchvision_key`` (e.g. locally stored pretrained weights).

- ``width`` k scales every channel count: stem ``64k``, stage planes ``64k, 128k, 256k,
  512k`` (Bottleneck outputs ``4 × planes``), each ``max(1, floor(c * k + 1/2))``. This is
  not torchvision's ``width_per_group`` (which widens only the Bottleneck's inner 3x3 and
  is refused by ``BasicBlock``).
- Blocks are named ``layer{i}.block{j}`` after torchvision's module path ``layer{i}[j]``:
  ``i`` in 1..4 (1-based, as torchvision), ``j`` 0-based (as torchvision).
- torchvision blocks end with ``relu(out + identity)``, which is not the identity on a
  signed stream when the branch is zero. ``new_block`` therefore wraps a fresh block in
  ``InsertedBlock``, which drops that final relu: ``z + branch(z)`` with the branch's last
  BatchNorm scale zeroed, the pure residual form of docs/science.md §1 for any ``z``.
- Weights are random (no download); pretrained weights are not supported offline.

``TVResNetConfig``, the stage layouts (``STAGE_BLOCKS``) and the point names are in the
torch-free ``configs.tvresnet``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.models.resnet import BasicBlock, Bottleneck, conv1x1

from .base import ResidualModel
from .configs.tvresnet import STAGE_BLOCKS, STAGE_PLANES, TVResNetConfig

BLOCK_TYPES: dict[str, type[BasicBlock | Bottleneck]] = {"basic": BasicBlock, "bottleneck": Bottleneck}
# Depth -> (torchvision block class, blocks per stage), from the torch-free layouts.
ARCHITECTURES = {depth: (BLOCK_TYPES[kind], counts) for depth, (kind, counts) in STAGE_BLOCKS.items()}


def branch_layers(block: BasicBlock | Bottleneck) -> list[tuple[nn.Conv2d, nn.BatchNorm2d]]:
    """The (conv, bn) pairs of a torchvision block's residual branch, input to output."""
    depth = 3 if isinstance(block, Bottleneck) else 2
    return [(getattr(block, f"conv{i}"), getattr(block, f"bn{i}")) for i in range(1, depth + 1)]


class InsertedBlock(nn.Module):
    """``z + branch(z)`` with a torchvision block's branch (conv-bn-relu ... conv-bn), no final relu."""

    def __init__(self, block: BasicBlock | Bottleneck):
        super().__init__()
        if block.downsample is not None or block.stride != 1:
            raise ValueError("an inserted block must keep the stream's shape (stride 1, no downsample)")
        self.block = block

    def forward(self, z: Tensor) -> Tensor:
        layers = branch_layers(self.block)
        h = z
        for i, (conv, bn) in enumerate(layers):
            h = bn(conv(h))
            if i < len(layers) - 1:
                h = F.relu(h)
        return z + h


def init_weights(module: nn.Module) -> None:
    """torchvision's ResNet init: Kaiming-normal (fan_out, relu) convs, BatchNorm scale 1 and shift 0."""
    for m in module.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class TVResNet(ResidualModel):
    """torchvision-style ResNet; stem conv1-bn1-relu-maxpool, blocks ``layer{i}.block{j}``, head avgpool-fc."""

    family = "tvresnet"
    last_point_low_rank = True  # a linear classifier on the stream averaged over space

    def __init__(self, config: TVResNetConfig):
        block_type, counts = ARCHITECTURES[config.depth]
        inplanes = config.scaled(64)
        stem = nn.Sequential(
            nn.Conv2d(config.in_channels, inplanes, kernel_size=7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(inplanes),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, padding=1),
        )
        blocks, names = [], []
        for i, (planes, count) in enumerate(zip(STAGE_PLANES, counts), start=1):
            planes = config.scaled(planes)
            for j in range(count):
                stride = 2 if i > 1 and j == 0 else 1
                downsample = None
                if stride != 1 or inplanes != planes * block_type.expansion:
                    downsample = nn.Sequential(
                        conv1x1(inplanes, planes * block_type.expansion, stride),
                        nn.BatchNorm2d(planes * block_type.expansion),
                    )
                blocks.append(block_type(inplanes, planes, stride, downsample))
                names.append(f"layer{i}.block{j}")
                inplanes = planes * block_type.expansion
        head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inplanes, config.num_classes))
        super().__init__(stem, blocks, names, head)
        init_weights(self)
        self.config = config
        self.spec = {"family": self.family, **asdict(config)}

    def new_block(self, point: str) -> InsertedBlock:
        """A stride-1 block of the same type on the stream at ``point``, last bn scale 0, no final relu."""
        existing = self.blocks[self.index(point)]
        channels = branch_layers(existing)[-1][1].num_features
        block = type(existing)(channels, channels // type(existing).expansion)
        init_weights(block)
        nn.init.zeros_(branch_layers(block)[-1][1].weight)
        return InsertedBlock(block).to(next(self.parameters()))  # this model's device and dtype


def torchvision_key(key: str, model: TVResNet) -> str:
    """This model's state-dict key for a torchvision ResNet key (``layer2.1.conv1.weight`` ...)."""
    stem = {"conv1": "stem.0", "bn1": "stem.1", "fc": "head.2"}
    first, _, rest = key.partition(".")
    if first in stem:
        return f"{stem[first]}.{rest}"
    block, _, rest = rest.partition(".")
    return f"blocks.{model.index(f'{first}.block{block}')}.{rest}"


def build(spec: dict[str, Any]) -> TVResNet:
    """A torchvision-style ResNet from ``spec`` (keys: the fields of ``TVResNetConfig`` and ``family``)."""
    return TVResNet(TVResNetConfig(**{k: v for k, v in spec.items() if k != "family"}))
