"""A model built on the meta device for its structure alone (insertion-point names, shapes), with
no memory and no values.

Its random initialization is skipped: on a meta tensor, ``normal_`` (``nn.Embedding``'s and the
families' own initializers, ``kaiming_normal_``) runs torch's Python reference kernel, whose
first call imports ``torch._dynamo``: about 1.5 s of CPU per process, for values a meta tensor
does not hold.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from . import build_model
from .base import ResidualModel


class _SkipNormalFill(TorchFunctionMode):
    """Every ``normal_`` (``Tensor.normal_``, ``nn.init.normal_``) returns its tensor unfilled."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", None) == "normal_":
            return args[0] if args else kwargs["tensor"]
        return func(*args, **kwargs)


def meta_model(spec: dict[str, Any]) -> ResidualModel:
    """``build_model(spec)`` on the meta device, its weights left unfilled."""
    with torch.device("meta"), _SkipNormalFill():
        return build_model(spec)
