"""Per-layer scores behind ``--at adept`` and ``--at bi``, measured on the retain data (the old domain).

- **ADEPT** (arXiv 2510.10071): the importance of decoder layer ``l`` is the first-order estimate of
  the loss change when its weights are zeroed, ``I_l = Σ_{w ∈ layer l} |g_w · w|`` with ``g = ∇_w L``
  the gradient of the mean next-token loss ``L`` on the retain windows; the least important layers are
  duplicated.
- **Block influence** (ShortGPT, arXiv 2403.03853): ``BI_l = 1 − E_t[cos(h_l^in(t), h_l^out(t))]``,
  the mean over tokens ``t`` of the cosine between the hidden state entering layer ``l`` and leaving
  it; a layer close to the identity has ``BI ≈ 0``, the least influential are duplicated.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from transformers import PreTrainedModel

from ..models.hf import decoder_layers_path, hidden_of
from ..training.continued import window_loss


def adept_importance(model: PreTrainedModel, x: Tensor, y: Tensor, batch_size: int) -> list[float]:
    """``I_l = Σ |g · W|`` over every parameter of decoder layer ``l`` (module doc), ``g`` the gradient of
    the mean loss over all of ``(x, y)`` (accumulated ``batch_size`` windows at a time); the model's
    ``requires_grad`` flags and gradients are left as they were."""
    layers = model.get_submodule(decoder_layers_path(model))
    flags = {p: p.requires_grad for p in model.parameters()}
    model.requires_grad_(False)
    layers.requires_grad_(True)
    try:
        for start in range(0, len(x), batch_size):
            xb, yb = x[start : start + batch_size], y[start : start + batch_size]
            (window_loss(model.eval(), xb, yb) * len(xb) / len(x)).backward()
        scores = [
            float(sum((p.grad * p).abs().sum().item() for p in layer.parameters() if p.grad is not None))
            for layer in layers
        ]
    finally:
        for p, flag in flags.items():
            p.grad = None
            p.requires_grad_(flag)
    return scores


@torch.no_grad()
def block_influence(model: PreTrainedModel, x: Tensor, batch_size: int) -> list[float]:
    """``BI_l = 1 − mean_t cos(h_l^in, h_l^out)`` per decoder layer (module doc), the mean over every
    token of the windows ``x`` (run ``batch_size`` at a time)."""
    layers = model.get_submodule(decoder_layers_path(model))
    inputs: dict[int, Tensor] = {}
    cosines: dict[int, float] = dict.fromkeys(range(len(layers)), 0.0)

    def before(index: int):
        def hook(_module, args, kwargs):
            inputs[index] = args[0] if args else kwargs["hidden_states"]

        return hook

    def after(index: int):
        def hook(_module, _args, output):
            cos = F.cosine_similarity(inputs.pop(index).float(), hidden_of(output).float(), dim=-1)
            cosines[index] += float(cos.sum()) / x.numel()  # x: (n, T) ids, one cosine per token

        return hook

    handles = [layer.register_forward_pre_hook(before(i), with_kwargs=True) for i, layer in enumerate(layers)]
    handles += [layer.register_forward_hook(after(i)) for i, layer in enumerate(layers)]
    try:
        for start in range(0, len(x), batch_size):
            model.eval()(input_ids=x[start : start + batch_size], use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    return [1.0 - cosines[i] for i in range(len(layers))]
