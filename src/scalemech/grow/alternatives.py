"""The arms a user would pick instead of growing, on the grown arm's tokens and batches (``--retain``).

- ``inplace``: the original with only its decoder layers at the chosen points trainable, nothing
  grown. A new layer is a copy of the layer it follows, so training those layers in place trains as
  many parameters as the new ones (fewer when two new layers copy one layer: the most possible).
- ``lora``: PEFT LoRA (``target_modules="all-linear"``: every linear layer but the output head) on
  the original. A rank-``r`` adapter on a linear map ``in → out`` trains ``r · (in + out)``
  parameters, so ``r = max(1, round(P_new / Σ (in + out)))`` matches the new layers' ``P_new`` to
  within half a rank step; ``lora_alpha = 2 r`` (a scale of 2), no dropout. The trained adapter is
  merged into the weights (``merge_and_unload``), giving a plain model.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from torch import nn
from transformers import PreTrainedModel
from transformers.pytorch_utils import Conv1D

from ..models.hf import decoder_layers_path

LORA_ALPHA_PER_RANK = 2


def trainable_count(model: nn.Module) -> int:
    """Parameters of ``model`` that require grad."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def layers_count(model: PreTrainedModel, indices: Iterable[int]) -> int:
    """Parameters of the decoder layers ``indices`` (each counted once)."""
    layers = model.get_submodule(decoder_layers_path(model))
    return sum(p.numel() for i in set(indices) for p in layers[i].parameters())


def lora_units(model: PreTrainedModel) -> int:
    """``Σ (in + out)`` over the linear layers a LoRA of ``all-linear`` adapts: a rank-1 adapter's size."""
    head = model.get_output_embeddings()
    total = 0
    for module in model.modules():
        if module is head:
            continue
        if isinstance(module, nn.Linear):
            total += module.in_features + module.out_features
        elif isinstance(module, Conv1D):
            total += sum(module.weight.shape)
    return total


def lora_rank(target: int, units: int) -> int:
    """The rank whose adapter size ``rank · units`` is closest to ``target`` parameters (at least 1)."""
    return max(1, round(target / units))


def lora_model(model: PreTrainedModel, rank: int) -> nn.Module:
    """A PEFT LoRA of rank ``rank`` on a copy of ``model`` (module doc): only the adapters train."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=rank, lora_alpha=LORA_ALPHA_PER_RANK * rank, lora_dropout=0.0, target_modules="all-linear", bias="none"
    )
    return get_peft_model(copy.deepcopy(model), config)


def merged(adapted: nn.Module) -> PreTrainedModel:
    """The LoRA model's adapters merged into its weights: a plain ``transformers`` model, frozen."""
    return adapted.merge_and_unload().requires_grad_(False).eval()
