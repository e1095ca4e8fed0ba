"""Pretrained Hugging Face decoder-only causal LMs behind the insertion-point interface.

``build(spec)`` reads the checkpoint's config first (``AutoConfig``: an unsupported
``model_type`` is refused before any weight is downloaded), loads
``AutoModelForCausalLM.from_pretrained`` and rewires its parts as
``stem → layer.0 … layer.{L-1} → head`` (``base.ResidualModel``), so the residual stream
after every decoder layer is an insertion point (docs/science.md §1, E9). One generic
wrapping serves every supported family; ``DECODER_LAYOUTS`` names each family's parts:

- stem  = token embedding (+ learned absolute positions, GPT-2's ``wpe``) + embedding dropout,
- block = one decoder layer as a map of the hidden states alone: it builds the causal mask
  (full, or sliding-window for the layers whose ``config.layer_types`` / ``sliding_window`` say
  so) and, for rotary models, the position embeddings from the stream's shape exactly as the
  HF model's own ``forward`` does (no KV cache, no padding),
- head  = final norm + ``lm_head`` (GPT-NeoX's ``embed_out``, GPT-2's tied ``wte``).

Supported ``model_type``: gpt2, gpt_neox (Pythia), llama, mistral, qwen2, qwen3. The parts
are the HF modules themselves, so ``model(ids)`` equals the HF logits. ``examples`` draws
windows of ``block_size`` tokens of a prepared text split in the checkpoint's own tokens
(``data.tokenized``), or of token ids given directly (``data.tokenized.TokenIdTask``). With
``frozen`` (the default) no parameter takes a gradient and the stem marks its output as
requiring one, so a backward pass computes gradients w.r.t. the residual stream only.
References: Radford et al. 2019 (GPT-2), Biderman et al. 2023 (Pythia), Touvron et al. 2023
(LLaMA), Jiang et al. 2023 (Mistral), Yang et al. 2024 (Qwen2); the ``modeling_*.py``
forwards of ``transformers`` v5.
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
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    PreTrainedConfig,
    PreTrainedModel,
)
from transformers.masking_utils import (
    create_causal_mask,
    create_sliding_window_causal_mask,
)
from transformers.pytorch_utils import Conv1D

from ..data.prepared import SPLITS, Prepared, text_windows
from ..data.tokenized import (
    TokenIds,
    TokenIdTask,
    text_from_bytes,
    tokenize_text,
)
from ..tasks import WindowTask
from .base import Chain, LanguageModel

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class DecoderLayout:
    """Attribute names of one ``model_type``'s parts, on its base model (``hf_model.base_model``)
    or, for ``output_projections``, on one decoder layer."""

    layers: str  # the list of decoder layers
    embedding: str  # token embedding (B, T) -> (B, T, d)
    position_embedding: str | None  # learned absolute position embedding, added to it (GPT-2)
    embedding_dropout: str | None  # dropout after the embedding, None if the model has none
    final_norm: str  # norm before lm_head
    output_projections: tuple[str, ...]  # linears that write a layer's branches into the stream
    rotary: str | None  # the shared rotary embedding module, None without rotary positions


LLAMA_LAYOUT = DecoderLayout(
    "layers", "embed_tokens", None, None, "norm", ("self_attn.o_proj", "mlp.down_proj"), "rotary_emb"
)
DECODER_LAYOUTS = {
    "gpt2": DecoderLayout("h", "wte", "wpe", "drop", "ln_f", ("attn.c_proj", "mlp.c_proj"), None),
    "gpt_neox": DecoderLayout(
        "layers",
        "embed_in",
        None,
        "emb_dropout",
        "final_layer_norm",
        ("attention.dense", "mlp.dense_4h_to_h"),
        "rotary_emb",
    ),
    "llama": LLAMA_LAYOUT,
    "mistral": LLAMA_LAYOUT,
    "qwen2": LLAMA_LAYOUT,
    "qwen3": LLAMA_LAYOUT,
}
"""The supported decoder families; each is tested on a tiny random checkpoint (tests/test_hf.py)."""
SUPPORTED = ", ".join(sorted(DECODER_LAYOUTS))
MASKS = {"full_attention": create_causal_mask, "sliding_attention": create_sliding_window_causal_mask}
"""The mask builder of each attention kind, as the HF model's forward picks it per layer."""


def attention_kind(config: PreTrainedConfig, index: int) -> str:
    """The attention of decoder layer ``index``: ``config.layer_types[index]`` where the config lists
    them (Qwen2/3), else sliding-window when ``config.sliding_window`` is set (Mistral), else full."""
    layer_types = getattr(config, "layer_types", None)
    kind = (
        layer_types[index]
        if layer_types
        else ("sliding_attention" if getattr(config, "sliding_window", None) is not None else "full_attention")
    )
    if kind not in MASKS:
        raise ValueError(
            f"layer {index} of model_type {config.model_type!r} has attention {kind!r}; supported: {sorted(MASKS)}"
        )
    return kind


class StreamStem(nn.Module):
    """Token embedding (+ learned positions ``0..T-1``) (+ dropout), whose output requires grad
    whenever grad mode is on.

    With frozen weights nothing upstream of the stream requires grad, so without this the
    residual stream would carry no graph and ``∇_z ℓ`` could not be taken.
    """

    def __init__(self, embedding: nn.Module, dropout: nn.Module | None, positions: nn.Module | None = None):
        super().__init__()
        self.embedding = embedding
        self.positions = positions
        self.dropout = dropout if dropout is not None else nn.Identity()

    def forward(self, ids: Tensor) -> Tensor:
        z = self.embedding(ids)  # (B, T, d)
        if self.positions is not None:
            position_ids = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)  # (1, T)
            z = z + self.positions(position_ids).to(z.device)
        z = self.dropout(z)
        if torch.is_grad_enabled() and not z.requires_grad:
            z.requires_grad_()
        return z


class DecoderBlock(nn.Module):
    """One HF decoder layer as ``z ↦ layer(z; mask, rotary(positions))``, ``(B, T, d) → (B, T, d)``.

    Positions are ``0..T-1`` and the mask is ``MASKS[attention]`` without padding, as in the HF
    model's forward without a cache; ``rotary`` is the model's one shared rotary embedding module
    (buffers only), None for a model with learned positions. ``index`` is the layer's position in
    the model (its ``layer_idx``).
    """

    def __init__(
        self,
        layer: nn.Module,
        rotary: nn.Module | None,
        config: PreTrainedConfig,
        attention: str = "full_attention",
        index: int = 0,
    ):
        super().__init__()
        self.layer = layer
        self.rotary = rotary
        self.config = config
        self.attention = attention
        self.index = index

    def forward(self, z: Tensor) -> Tensor:
        position_ids = torch.arange(z.shape[1], device=z.device).unsqueeze(0)  # (1, T)
        mask = MASKS[self.attention](
            config=self.config, inputs_embeds=z, attention_mask=None, past_key_values=None, position_ids=position_ids
        )
        extra = {} if self.rotary is None else {"position_embeddings": self.rotary(z, position_ids=position_ids)}
        return self.layer(z, attention_mask=mask, position_ids=position_ids, **extra)


def unsupported(model_type: str, checkpoint: Any) -> ValueError:
    return ValueError(
        f"model_type {model_type!r} of checkpoint {checkpoint!r} is not supported; supported decoder LMs: {SUPPORTED}"
    )


class HFCausalLM(LanguageModel):
    """A Hugging Face causal LM split into stem, ``layer.{i}`` blocks and head (see module doc)."""

    family = "hf"

    def __init__(self, hf_model: PreTrainedModel, spec: dict[str, Any]):
        config = hf_model.config
        if config.model_type not in DECODER_LAYOUTS:
            raise unsupported(config.model_type, spec.get("checkpoint"))
        layout = DECODER_LAYOUTS[config.model_type]
        decoder = hf_model.base_model

        def part(name: str | None) -> nn.Module | None:
            return getattr(decoder, name) if name else None

        stem = StreamStem(part(layout.embedding), part(layout.embedding_dropout), part(layout.position_embedding))
        rotary = part(layout.rotary)
        layers = list(getattr(decoder, layout.layers))[: config.num_hidden_layers]
        blocks = [DecoderBlock(layer, rotary, config, attention_kind(config, i), i) for i, layer in enumerate(layers)]
        head = Chain([part(layout.final_norm), hf_model.get_output_embeddings()])
        super().__init__(stem, blocks, [f"layer.{i}" for i in range(len(blocks))], head)
        self.spec = dict(spec)
        self.config = config
        self.layout = layout
        self.depth: int = config.num_hidden_layers
        self.width: int = config.hidden_size
        self.tokenizer_name: str = spec["checkpoint"]
        self.block_size: int = int(spec.get("block_size", config.max_position_embeddings))
        if not 1 <= self.block_size <= config.max_position_embeddings:
            raise ValueError(
                f"block_size {self.block_size} is outside [1, {config.max_position_embeddings}] "
                f"(max_position_embeddings of {spec['checkpoint']!r})"
            )

    def task(self, data: Prepared | TokenIds) -> TokenTask | TokenIdTask:
        """Next-token prediction on ``data``: a prepared text split in the checkpoint's own tokens
        (``TokenTask``), or token ids given directly (``TokenIds``: ``TokenIdTask``, no tokenizer)."""
        if getattr(data, "kind", None) == "tokens":
            return TokenIdTask(data, self.block_size, self.config.vocab_size)
        return TokenTask(
            data,
            self.tokenizer_name,
            self.spec.get("revision"),
            bool(self.spec.get("local_files_only", False)),
            self.block_size,
        )

    def new_block(self, point: str) -> DecoderBlock:
        """A fresh decoder layer of this model's type and config for the stream at ``point``.

        Built as the layer at ``point`` (same ``layer_idx``, hence the same attention kind), with
        linear weights (``nn.Linear``, GPT-2's ``Conv1D``) ~ N(0, initializer_range²) and zero
        biases (HF's init), norms at their identity init, and every output projection zeroed, so
        ``h_0(z) = z``.
        """
        i = self.index(point)
        reference = self.blocks[i]
        weight = next(reference.layer.parameters())
        layer = type(reference.layer)(self.config, reference.index).to(device=weight.device, dtype=weight.dtype)
        std = getattr(self.config, "initializer_range", 0.02)
        with torch.no_grad():
            for module in layer.modules():
                if isinstance(module, (nn.Linear, Conv1D)):
                    module.weight.normal_(0.0, std)
                    if module.bias is not None:
                        module.bias.zero_()
            for name in self.layout.output_projections:
                for param in layer.get_submodule(name).parameters():
                    param.zero_()
        rotary = copy.deepcopy(reference.rotary) if reference.rotary is not None else None
        return DecoderBlock(layer.train(self.training), rotary, self.config, reference.attention, reference.index)


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
        raise FileNotFoundError(
            f"{checkpoint!r} (revision {revision!r}) is neither a local directory nor in the "
            f"local Hugging Face cache ({constants.HF_HUB_CACHE}), and {why} "
            "forbids downloading it"
        )


def build(spec: dict[str, Any]) -> HFCausalLM:
    """Load ``spec['checkpoint']`` (hub name or local directory) as an ``HFCausalLM`` in eval mode.

    The config is read first; a ``model_type`` outside ``DECODER_LAYOUTS`` raises ``ValueError``
    naming the supported ones before the weights are fetched.

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
    config = AutoConfig.from_pretrained(spec["checkpoint"], revision=revision, local_files_only=local_files_only)
    if config.model_type not in DECODER_LAYOUTS:  # before any weight is downloaded
        raise unsupported(config.model_type, spec["checkpoint"])
    hf_model = AutoModelForCausalLM.from_pretrained(
        spec["checkpoint"],
        config=config,
        revision=revision,
        local_files_only=local_files_only,
        dtype=DTYPES[dtype_name],
    )
    if spec.get("frozen", True):
        hf_model.requires_grad_(False)
    return HFCausalLM(hf_model, spec).eval()


class TokenTask(WindowTask):
    """A text dataset in a checkpoint's tokens: a split's byte stream is decoded (utf-8, errors
    replaced) and tokenized (``tokenize_text``) once; an example is a window of ``block_size``
    tokens of that stream (``tasks.WindowTask``)."""

    def __init__(self, data: Prepared, tokenizer: str, revision: str | None, local_files_only: bool, block_size: int):
        if data.kind != "text":
            raise ValueError(f"hf models take text data; {data.name!r} holds {data.kind}")
        self.data, self.block_size = data, block_size
        self.tokenizer = (tokenizer, revision, local_files_only)  # tokenize_text's arguments after the text
        self._streams: dict[str, Tensor] = {}

    def stream(self, split: str) -> Tensor:
        """The token stream of ``split`` (tokenized once)."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}; allowed {SPLITS}")
        if split not in self._streams:
            self._streams[split] = tokenize_text(text_from_bytes(getattr(self.data, f"{split}_x")), *self.tokenizer)
        return self._streams[split]

    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]:
        return text_windows(self.stream(split), index, self.block_size)


def point_count(depth: int) -> None:
    """None: a checkpoint's layer count, not the tables' depth, fixes its insertion points."""
    return None
