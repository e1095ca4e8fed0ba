"""Pretrained Hugging Face causal LMs (Pythia/GPT-NeoX, LLaMA) behind the insertion-point interface.

``build(spec)`` loads ``AutoModelForCausalLM.from_pretrained`` and rewires its parts as
``stem → layer.0 … layer.{L-1} → head`` (``base.ResidualModel``), so the residual stream
after every decoder layer is an insertion point (docs/science.md §1, E9):

- stem  = token embedding (GPT-NeoX ``embed_in`` + embedding dropout; LLaMA ``embed_tokens``),
- block = one decoder layer as a map of the hidden states alone: it builds the rotary
  position embeddings and the causal mask from the stream's shape exactly as the HF
  model's own ``forward`` does (no KV cache, no padding),
- head  = final norm + ``lm_head`` (the checkpoints' ``embed_out`` for GPT-NeoX).

The parts are the HF modules themselves, so ``model(ids)`` equals the HF logits.
``examples`` draws windows of ``block_size`` tokens of a prepared text split in the
checkpoint's own tokens (``data.tokenized``). With ``frozen`` (the default) no parameter
takes a gradient and the stem marks its output as requiring one, so a backward pass
computes gradients w.r.t. the residual stream only.
References: Biderman et al. 2023 (Pythia), Touvron et al. 2023 (LLaMA), the
``modeling_gpt_neox.py`` / ``modeling_llama.py`` forwards of ``transformers`` v5.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from huggingface_hub import constants, is_offline_mode, try_to_load_from_cache
from huggingface_hub.errors import HFValidationError
from torch import Tensor, nn
from transformers import AutoModelForCausalLM, PreTrainedConfig, PreTrainedModel
from transformers.masking_utils import create_causal_mask

from ..data.prepared import SPLITS, Prepared, text_windows
from ..data.tokenized import text_from_bytes, token_starts, tokenize_text
from ..tasks import windows_overlap
from .base import Chain, LanguageModel

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class DecoderParts:
    """Attribute names of one ``model_type``'s parts (on the base model, or on a decoder layer)."""

    embedding: str                       # token embedding (B, T) -> (B, T, d)
    embedding_dropout: str | None        # dropout after the embedding, None if the model has none
    final_norm: str                      # norm before lm_head
    output_projections: tuple[str, ...]  # linears that write a layer's branches into the stream


DECODER_PARTS = {
    "gpt_neox": DecoderParts("embed_in", "emb_dropout", "final_layer_norm", ("attention.dense", "mlp.dense_4h_to_h")),
    "llama": DecoderParts("embed_tokens", None, "norm", ("self_attn.o_proj", "mlp.down_proj")),
}


class StreamStem(nn.Module):
    """Token embedding (+ dropout) whose output requires grad whenever grad mode is on.

    With frozen weights nothing upstream of the stream requires grad, so without this the
    residual stream would carry no graph and ``∇_z ℓ`` could not be taken.
    """

    def __init__(self, embedding: nn.Module, dropout: nn.Module | None):
        super().__init__()
        self.embedding = embedding
        self.dropout = dropout if dropout is not None else nn.Identity()

    def forward(self, ids: Tensor) -> Tensor:
        z = self.dropout(self.embedding(ids))  # (B, T, d)
        if torch.is_grad_enabled() and not z.requires_grad:
            z.requires_grad_()
        return z


class DecoderBlock(nn.Module):
    """One HF decoder layer as ``z ↦ layer(z; mask, rotary(positions))``, ``(B, T, d) → (B, T, d)``.

    Positions are ``0..T-1`` and the mask is ``create_causal_mask`` without padding, as in
    the HF model's forward without a cache; ``rotary`` is the model's one shared rotary
    embedding module (buffers only).
    """

    def __init__(self, layer: nn.Module, rotary: nn.Module, config: PreTrainedConfig):
        super().__init__()
        self.layer = layer
        self.rotary = rotary
        self.config = config

    def forward(self, z: Tensor) -> Tensor:
        position_ids = torch.arange(z.shape[1], device=z.device).unsqueeze(0)  # (1, T)
        mask = create_causal_mask(config=self.config, inputs_embeds=z, attention_mask=None,
                                  past_key_values=None, position_ids=position_ids)
        cos_sin = self.rotary(z, position_ids=position_ids)  # 2 × (1, T, rotary_dim)
        return self.layer(z, attention_mask=mask, position_ids=position_ids, position_embeddings=cos_sin)


class HFCausalLM(LanguageModel):
    """A Hugging Face causal LM split into stem, ``layer.{i}`` blocks and head (see module doc)."""

    family = "hf"

    def __init__(self, hf_model: PreTrainedModel, spec: dict[str, Any]):
        config = hf_model.config
        if config.model_type not in DECODER_PARTS:
            raise ValueError(f"model_type {config.model_type!r} of checkpoint {spec.get('checkpoint')!r} "
                             f"is not supported; supported: {sorted(DECODER_PARTS)}")
        parts = DECODER_PARTS[config.model_type]
        decoder = hf_model.base_model
        dropout = getattr(decoder, parts.embedding_dropout) if parts.embedding_dropout else None
        stem = StreamStem(getattr(decoder, parts.embedding), dropout)
        blocks = [DecoderBlock(layer, decoder.rotary_emb, config) for layer in decoder.layers]
        head = Chain([getattr(decoder, parts.final_norm), hf_model.get_output_embeddings()])
        super().__init__(stem, blocks, [f"layer.{i}" for i in range(len(blocks))], head)
        self.spec = dict(spec)
        self.config = config
        self.parts = parts
        self.depth: int = config.num_hidden_layers
        self.width: int = config.hidden_size
        self.tokenizer_name: str = spec["checkpoint"]
        self.block_size: int = int(spec.get("block_size", config.max_position_embeddings))
        if not 1 <= self.block_size <= config.max_position_embeddings:
            raise ValueError(f"block_size {self.block_size} is outside [1, {config.max_position_embeddings}] "
                             f"(max_position_embeddings of {spec['checkpoint']!r})")

    def task(self, data: Prepared) -> TokenTask:
        """Next-token prediction on ``data``'s text in the checkpoint's own tokens."""
        return TokenTask(data, self.tokenizer_name, self.spec.get("revision"),
                         bool(self.spec.get("local_files_only", False)), self.block_size)


    def new_block(self, point: str) -> DecoderBlock:
        """A fresh decoder layer of this model's type and config for the stream at ``point``.

        Linear weights ~ N(0, initializer_range²) and zero biases (HF's init), norms at
        their identity init, and every output projection zeroed, so ``h_0(z) = z``.
        """
        i = self.index(point)
        reference = self.blocks[i]
        weight = next(reference.layer.parameters())
        layer = type(reference.layer)(self.config, i + 1).to(device=weight.device, dtype=weight.dtype)
        std = getattr(self.config, "initializer_range", 0.02)
        with torch.no_grad():
            for module in layer.modules():
                if isinstance(module, nn.Linear):
                    module.weight.normal_(0.0, std)
                    if module.bias is not None:
                        module.bias.zero_()
            for name in self.parts.output_projections:
                for param in layer.get_submodule(name).parameters():
                    param.zero_()
        return DecoderBlock(layer.train(self.training), copy.deepcopy(reference.rotary), self.config)


def _check_available(checkpoint: str, revision: str, local_files_only: bool) -> None:
    """``FileNotFoundError`` at once when downloads are off and ``checkpoint`` is neither a local
    directory nor in the local hub cache (``from_pretrained`` would fail later, at length)."""
    offline = is_offline_mode()
    if Path(checkpoint).is_dir() or not (offline or local_files_only):
        return
    try:
        cached = try_to_load_from_cache(checkpoint, "config.json", revision=revision)
    except HFValidationError:  # not even a valid hub name
        cached = None
    if not isinstance(cached, str):
        why = "offline mode (HF_HUB_OFFLINE=1)" if offline else "local_files_only"
        raise FileNotFoundError(f"{checkpoint!r} (revision {revision!r}) is neither a local directory nor in the "
                                f"local Hugging Face cache ({constants.HF_HUB_CACHE}), and {why} "
                                "forbids downloading it")


def build(spec: dict[str, Any]) -> HFCausalLM:
    """Load ``spec['checkpoint']`` (hub name or local directory) as an ``HFCausalLM`` in eval mode.

    Keys: ``checkpoint``; ``revision`` (a pin, None for local directories);
    ``local_files_only`` (default False); ``dtype`` ("float32" default | "bfloat16");
    ``frozen`` (default True: no parameter requires grad); ``block_size`` (tokens per example,
    default ``max_position_embeddings``).
    """
    if "checkpoint" not in spec:
        raise ValueError(f"an 'hf' model spec needs a 'checkpoint' (hub name or directory), got keys {sorted(spec)}")
    dtype_name = spec.get("dtype", "float32")
    if dtype_name not in DTYPES:
        raise ValueError(f"dtype {dtype_name!r} is not supported for 'hf' models; allowed: {sorted(DTYPES)}")
    revision, local_files_only = spec.get("revision") or "main", bool(spec.get("local_files_only", False))
    _check_available(spec["checkpoint"], revision, local_files_only)
    hf_model = AutoModelForCausalLM.from_pretrained(spec["checkpoint"], revision=revision,
                                                    local_files_only=local_files_only, dtype=DTYPES[dtype_name])
    if spec.get("frozen", True):
        hf_model.requires_grad_(False)
    return HFCausalLM(hf_model, spec).eval()


class TokenTask:
    """A text dataset in a checkpoint's tokens: a split's byte stream is decoded (utf-8, errors
    replaced) and tokenized (``tokenize_text``); an example is a window of ``block_size`` tokens
    at a start drawn by ``token_starts`` (the ``tasks.Task`` interface)."""

    overlaps_per_example = 2

    def __init__(self, data: Prepared, tokenizer: str, revision: str | None, local_files_only: bool,
                 block_size: int):
        if data.kind != "text":
            raise ValueError(f"hf models take text data; {data.name!r} holds {data.kind}")
        self.data, self.block_size = data, block_size
        self.tokenizer = (tokenizer, revision, local_files_only)   # tokenize_text's arguments after the text
        self._streams: dict[str, Tensor] = {}

    def tokens(self, split: str) -> Tensor:
        """The token stream of ``split`` (tokenized once)."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}; allowed {SPLITS}")
        if split not in self._streams:
            self._streams[split] = tokenize_text(text_from_bytes(getattr(self.data, f"{split}_x")), *self.tokenizer)
        return self._streams[split]

    def spec_keys(self) -> dict[str, Any]:
        return {}

    def draw(self, split: str, n: int, seed: int) -> Tensor:
        return token_starts(self.tokens(split).numel(), n, self.block_size, seed)

    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]:
        return text_windows(self.tokens(split), index, self.block_size)

    def overlaps(self, index: Tensor, others: Tensor) -> Tensor:
        return windows_overlap(index, others, self.block_size)

    def to_input(self, x: Tensor) -> Tensor:
        return x.long()
