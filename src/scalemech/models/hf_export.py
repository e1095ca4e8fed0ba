"""A trained ``llama`` (``models.llama``) as a ``transformers`` ``LlamaForCausalLM``: the same function.

The two architectures are the same network: pre-norm RMSNorm (eps ``1e-5``), rotate-half rotary
embeddings with ``inv_freq = θ^(-2i/hs)``, SwiGLU ``down(silu(gate(x)) · up(x))``, no biases, causal
attention with as many key/value heads as query heads. The export only renames and splits tensors:
the fused ``qkv`` (rows ``[q; k; v]``) becomes ``q_proj``, ``k_proj``, ``v_proj``; ``attn.proj`` is
``o_proj``; ``attn_norm`` / ``mlp_norm`` are ``input_layernorm`` / ``post_attention_layernorm``. A
byte-level tokenizer (``byte_tokenizer``: token id = byte value, as the project's text data sets
encode) goes with it, so the directory ``save_hf`` writes is an ordinary Hugging Face checkpoint:
``AutoModelForCausalLM.from_pretrained`` and ``AutoTokenizer.from_pretrained`` load it, and
``scalemech grow`` grows it (E12).
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import LlamaConfig as HFLlamaConfig
from transformers import LlamaForCausalLM, PreTrainedTokenizerFast

from .llama import Llama

RMS_EPS = 1e-5  # models.llama.RMSNorm's default


def hf_config(model: Llama) -> HFLlamaConfig:
    """The ``transformers`` config of ``model``'s architecture (module doc)."""
    c = model.config
    return HFLlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.width,
        intermediate_size=c.mlp_hidden,
        num_hidden_layers=len(model.blocks),
        num_attention_heads=c.n_head,
        num_key_value_heads=c.n_head,
        head_dim=c.head_dim,
        hidden_act="silu",
        max_position_embeddings=c.block_size,
        rms_norm_eps=RMS_EPS,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_base},
        tie_word_embeddings=c.tie_embeddings,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
    )


def hf_state(model: Llama) -> dict[str, torch.Tensor]:
    """``model``'s tensors under ``LlamaForCausalLM``'s names (module doc), detached copies."""
    width = model.config.width
    state = {"model.embed_tokens.weight": model.stem.weight, "model.norm.weight": model.head.norm.weight}
    state["lm_head.weight"] = model.head.lm_head.weight
    for i, block in enumerate(model.blocks):
        prefix = f"model.layers.{i}."
        q, k, v = block.attn.qkv.weight.split(width, dim=0)
        state |= {
            prefix + "input_layernorm.weight": block.attn_norm.weight,
            prefix + "self_attn.q_proj.weight": q,
            prefix + "self_attn.k_proj.weight": k,
            prefix + "self_attn.v_proj.weight": v,
            prefix + "self_attn.o_proj.weight": block.attn.proj.weight,
            prefix + "post_attention_layernorm.weight": block.mlp_norm.weight,
            prefix + "mlp.gate_proj.weight": block.mlp.gate.weight,
            prefix + "mlp.up_proj.weight": block.mlp.up.weight,
            prefix + "mlp.down_proj.weight": block.mlp.down.weight,
        }
    return {name: tensor.detach().clone() for name, tensor in state.items()}


def to_hf(model: Llama) -> LlamaForCausalLM:
    """``model`` as a float32 ``LlamaForCausalLM`` on the CPU, in eval mode: the same logits
    (``tests/test_hf.py`` checks them)."""
    if not isinstance(model, Llama):
        raise TypeError(f"to_hf exports a scalemech llama; got {type(model).__name__}")
    exported = LlamaForCausalLM(hf_config(model))
    exported.load_state_dict({k: v.float().cpu() for k, v in hf_state(model).items()}, strict=True)
    exported.tie_weights()
    return exported.eval()


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer whose token ids are the text's UTF-8 byte values 0-255: GPT-2's
    byte-to-unicode alphabet with no merges (``tokenizers``' byte-level BPE), so ``decode`` inverts
    ``encode`` for any text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbol = bytes_to_unicode()  # byte -> the character the byte-level pre-tokenizer writes for it
    vocab = {symbol[byte]: byte for byte in range(256)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, clean_up_tokenization_spaces=False)


def save_hf(model: Llama, directory: str | Path) -> Path:
    """Write ``model`` (``to_hf``) and ``byte_tokenizer`` into ``directory``, loadable by plain
    ``transformers``; returns the directory."""
    directory = Path(directory)
    to_hf(model).save_pretrained(directory)
    byte_tokenizer().save_pretrained(directory)
    return directory
