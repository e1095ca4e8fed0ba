"""Growing a Hugging Face decoder: new layers inserted into the model's own layer list.

A new layer after decoder layer ``i`` is ``hf.zero_output_copy`` of layer ``i`` (LLaMA-Pro's block
expansion): its output projections are zero, so the grown model computes the same function. Unlike a
patched module list, the grown model is built from its own config (``grown_config``:
``num_hidden_layers`` and every per-layer list such as ``layer_types`` updated), so each layer gets
the ``layer_idx`` of its new place, tied embeddings stay tied, the KV cache has a slot per layer,
and the model ``save_pretrained`` writes loads with plain ``from_pretrained``. Then its weights are
loaded strictly, and ``check_grown`` compares its logits with the old model's (``base.check_preserved``,
the function check E11 applies too).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
from torch import Tensor
from transformers import AutoModelForCausalLM, PretrainedConfig, PreTrainedModel
from transformers.initialization import no_init_weights

from ..core.device import placed
from .base import check_preserved
from .hf import decoder_layers_path, zero_output_copy


def new_positions(depth: int, after: Sequence[int]) -> tuple[list[int], list[tuple[int, int]]]:
    """Where each old layer and each new one sits in the grown stack of ``depth + len(after)`` layers.

    ``after`` lists, in the old numbering, the layer each new layer follows (repeats allowed: two new
    layers after the same one). Returns ``(old_to_new, new_layers)``: ``old_to_new[i]`` is old layer
    ``i``'s new index, and ``new_layers`` holds ``(new index, old layer copied)`` of each new layer."""
    bad = [i for i in after if not 0 <= i < depth]
    if bad:
        raise ValueError(f"cannot insert after layers {bad}: the model has layers 0..{depth - 1}")
    old_to_new, new_layers, index = [], [], 0
    for i in range(depth):
        old_to_new.append(index)
        index += 1
        for _ in range(list(after).count(i)):
            new_layers.append((index, i))
            index += 1
    return old_to_new, new_layers


def grown_config(config: PretrainedConfig, after: Sequence[int]) -> PretrainedConfig:
    """A copy of ``config`` for the grown stack: the text config's ``num_hidden_layers`` counts the new
    layers, and every per-layer list (a list as long as the old stack, e.g. ``layer_types``) holds,
    for each new layer, the entry of the layer it copies, right after that layer's own."""
    grown = copy.deepcopy(config)
    text = grown.get_text_config()
    depth = text.num_hidden_layers
    for name, value in list(vars(text).items()):
        if isinstance(value, list | tuple) and len(value) == depth and name != "architectures":
            entries = []
            for i, entry in enumerate(value):
                entries += [entry] * (1 + list(after).count(i))
            setattr(text, name, type(value)(entries))
    text.num_hidden_layers = depth + len(after)
    return grown


def grown_state(
    model: PreTrainedModel, old_to_new: Sequence[int], new_layers: Sequence[tuple[int, int]]
) -> dict[str, Tensor]:
    """The state dict of the grown model (``new_positions``' layout): old layer ``i``'s tensors under
    ``old_to_new[i]``, each new layer's from ``zero_output_copy`` of the layer it follows; everything
    outside the stack as is."""
    path = decoder_layers_path(model)
    layers = model.get_submodule(path)
    state = {}
    prefix = f"{path}."
    for name, tensor in model.state_dict().items():
        if not name.startswith(prefix):
            state[name] = tensor
            continue
        index, rest = name[len(prefix) :].split(".", 1)
        state[f"{prefix}{old_to_new[int(index)]}.{rest}"] = tensor
    for index, source in new_layers:
        for rest, tensor in zero_output_copy(layers[source], model.config.model_type).state_dict().items():
            state[f"{prefix}{index}.{rest}"] = tensor
    return state


def grow_layers(model: PreTrainedModel, after: Sequence[int]) -> tuple[PreTrainedModel, list[int]]:
    """``model`` with a new layer after each of the old layers ``after`` (module doc), in its dtype and
    on its device, in eval mode with every parameter requiring grad; and the new layers' indices.

    ``ValueError`` naming the family when the grown model's weights do not match its config (a
    per-layer setting this module cannot renumber)."""
    config = grown_config(model.config, after)
    old_to_new, new_layers = new_positions(len(model.get_submodule(decoder_layers_path(model))), after)
    parameter = next(model.parameters())
    with no_init_weights():
        grown = AutoModelForCausalLM.from_config(config, dtype=parameter.dtype)
    try:
        grown.load_state_dict(grown_state(model, old_to_new, new_layers), strict=True)
    except RuntimeError as err:
        summary = " ".join(str(err).split())[:200]
        raise ValueError(
            f"model_type {model.config.model_type!r}: the grown model's weights do not fit its config "
            f"({summary}); this family's layers cannot be inserted generically"
        ) from None
    grown.tie_weights()  # loading fills both tensors of tied embeddings; tying makes them one again
    return grown.to(parameter.device).eval(), [index for index, _ in new_layers]


@torch.no_grad()
def _logits(model: PreTrainedModel, ids: Tensor, device: torch.device) -> Tensor:
    with placed(model, device):
        return model.eval()(input_ids=ids, use_cache=False).logits


INDEX_DEPENDENT = {"scale_attn_by_inverse_layer_idx": True}
"""Config flags under which a decoder layer's function depends on its index (GPT-2 scales attention by
``1 / (layer_idx + 1)``): an inserted layer moves every layer above it, changing the function."""


def index_dependence(config: dict) -> str | None:
    """Why layers cannot be inserted into a model of ``config`` (its ``config.json``) without changing
    its function, read from the config alone; None when nothing says so."""
    flags = [f"{key}: {str(value).lower()}" for key, value in INDEX_DEPENDENT.items() if config.get(key) == value]
    if not flags:
        return None
    return (
        f"model_type {config.get('model_type')!r} with {', '.join(flags)} computes each layer by its index, so "
        "an inserted layer changes the layers above it: grow cannot insert layers into this checkpoint "
        "(certify measures it)"
    )


@torch.no_grad()
def check_grown(old: PreTrainedModel, grown: PreTrainedModel, ids: Tensor, device: torch.device) -> float:
    """``base.check_preserved`` on the logits of ``old`` and ``grown`` (float32, eval mode) for ``ids``
    (B, T), each model on ``device`` in turn (``core.device.placed``): ``max |Δ logits|``; ``ValueError``
    naming the family when the insertion changed them."""
    if old.dtype != torch.float32 or grown.dtype != torch.float32:
        raise ValueError(f"check_grown compares float32 models; got {old.dtype} and {grown.dtype}")
    old_logits, grown_logits = (_logits(m, ids.to(device), device) for m in (old, grown))
    what = f"model_type {old.config.model_type!r}: inserting layers"
    return check_preserved(old_logits, grown_logits, what, "logits", "; grow cannot insert layers into this family")
