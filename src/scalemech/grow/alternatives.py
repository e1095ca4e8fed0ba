"""The arms a user would pick instead of growing, on the grown arm's tokens and batches (``--retain``).

- ``inplace``: the original with only its decoder layers at the chosen points trainable, nothing
  grown. A new layer is a copy of the layer it follows, so training those layers in place trains as
  many parameters as the new ones (fewer when two new layers copy one layer: the most possible).
- ``lora``: PEFT LoRA (``target_modules="all-linear"``: every linear layer but the output head, and
  a mixture of experts' expert weights) on the original. A rank-``r`` adapter on a linear map
  ``in → out`` trains ``r · (in + out)`` parameters, so ``r = max(1, round(P_new / Σ (in + out)))``
  matches the new layers' ``P_new`` to within half a rank step; ``lora_alpha = 2 r`` (a scale of 2),
  no dropout, ``A`` drawn from the run's seed. The trained adapter is merged into the weights
  (``merge_and_unload``): a plain model.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM, PreTrainedModel

from ..models.hf import decoder_layers_path

LORA_ALPHA_PER_RANK = 2


def trainable_count(model: nn.Module) -> int:
    """Parameters of ``model`` that require grad."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def layers_count(model: PreTrainedModel, indices: Iterable[int]) -> int:
    """Parameters of the decoder layers ``indices`` (each counted once)."""
    layers = model.get_submodule(decoder_layers_path(model))
    return sum(p.numel() for i in set(indices) for p in layers[i].parameters())


def lora_config(rank: int) -> Any:
    """PEFT's ``LoraConfig`` of the ``lora`` arm (module doc)."""
    from peft import LoraConfig

    alpha = LORA_ALPHA_PER_RANK * rank
    return LoraConfig(r=rank, lora_alpha=alpha, lora_dropout=0.0, target_modules="all-linear", bias="none")


def lora_units(model: PreTrainedModel) -> int:
    """A rank-1 adapter's size, ``Σ (in + out)`` over what PEFT's ``all-linear`` adapts (linear layers, and
    a mixture of experts' stacked expert weights), counted on a copy of the model built on the meta
    device (no memory)."""
    from peft import get_peft_model

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(model.config)
    return trainable_count(get_peft_model(skeleton, lora_config(1)))


def lora_rank(target: int, units: int) -> int:
    """The rank whose adapter size ``rank · units`` is closest to ``target`` parameters (at least 1)."""
    return max(1, round(target / units))


def lora_model(model: PreTrainedModel, rank: int, seed: int) -> nn.Module:
    """A PEFT LoRA of rank ``rank`` on a copy of ``model`` (module doc): only the adapters train. Their
    random initialization (``A``; ``B = 0``) is drawn from ``seed`` alone, the global RNG left as it was."""
    from peft import get_peft_model

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return get_peft_model(copy.deepcopy(model), lora_config(rank))


def merged(adapted: nn.Module) -> PreTrainedModel:
    """The LoRA model's adapters merged into its weights: a plain ``transformers`` model, frozen."""
    return adapted.merge_and_unload().requires_grad_(False).eval()
