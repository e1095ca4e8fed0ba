"""Text tokenized with a pretrained checkpoint's own tokenizer, cut into next-token windows.

Used for the Pythia suite (docs/science.md §5, E9): a split's text (the data layer splits the
text 90/10, contiguously, before this) comes from a prepared byte stream, a local text
file or a Hugging Face dataset, is encoded with ``AutoTokenizer`` of the checkpoint
into one token stream, and ``token_pool`` draws ``n`` non-overlapping windows from it:
``x = w[:, :-1]``, ``y = w[:, 1:]`` (the batching of nanoGPT's ``get_batch``, without
overlap so the examples are distinct).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch
from torch import Tensor

from .prepared import text_windows


def text_from_bytes(stream: Tensor) -> str:
    """The text of a prepared byte stream (uint8 tensor), undecodable bytes as U+FFFD."""
    if stream.dtype != torch.uint8 or stream.dim() != 1:
        raise ValueError(f"a byte stream is a 1-D uint8 tensor, got {stream.dtype} of shape {tuple(stream.shape)}")
    return bytes(stream.cpu().numpy()).decode("utf-8", errors="replace")


def text_from_file(path: str | Path) -> str:
    """The text of a local file (utf-8, undecodable bytes as U+FFFD)."""
    return Path(path).read_text(encoding="utf-8", errors="replace")


def text_from_hub(name: str, split: str = "train", column: str = "text", revision: str | None = None) -> str:
    """The rows of ``column`` of a Hugging Face dataset split, joined by newlines (needs ``datasets``)."""
    try:
        import datasets
    except ImportError:
        raise ImportError(f"reading the Hugging Face dataset {name!r} needs the `datasets` package: "
                          "pip install datasets") from None
    rows = datasets.load_dataset(name, split=split, revision=revision)
    if column not in rows.column_names:
        raise KeyError(f"dataset {name!r} split {split!r} has no column {column!r}; it has {rows.column_names}")
    return "\n".join(rows[column])


@lru_cache(maxsize=8)
def load_tokenizer(checkpoint: str, revision: str | None = None, local_files_only: bool = False):
    """``AutoTokenizer`` of ``checkpoint`` (hub name or directory), cached per process."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(checkpoint, revision=revision or "main", local_files_only=local_files_only)


def tokenize_text(text: str, checkpoint: str, revision: str | None = None, local_files_only: bool = False) -> Tensor:
    """Token ids of ``text`` as one stream, shape ``(N,)`` int64, no special tokens added."""
    tokenizer = load_tokenizer(checkpoint, revision, local_files_only)
    ids = tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.int64)


def token_starts(n_tokens: int, n: int, block_size: int, seed: int) -> Tensor:
    """Starts of ``n`` windows of ``block_size + 1`` tokens at random non-overlapping offsets.

    Offsets ``s_k = k·(block_size + 1) + u_(k)`` with ``u`` sorted uniform draws from
    ``[0, N − n·(block_size + 1)]``, so consecutive windows never overlap; returned in a seeded
    random order, shape ``(n,)``.
    """
    window = block_size + 1
    slack = n_tokens - n * window
    if n < 1 or block_size < 1 or slack < 0:
        raise ValueError(f"cannot cut n={n} windows of block_size+1={window} tokens from a stream of "
                         f"{n_tokens} tokens; need n >= 1, block_size >= 1 and n*(block_size+1) <= N")
    generator = torch.Generator().manual_seed(seed)
    shifts = torch.randint(0, slack + 1, (n,), generator=generator).sort().values  # (n,)
    starts = torch.arange(n) * window + shifts
    return starts[torch.randperm(n, generator=generator)]


def token_pool(tokens: Tensor, n: int, block_size: int, seed: int) -> tuple[Tensor, Tensor]:
    """``(x, y) = (w[:, :-1], w[:, 1:])``, each ``(n, block_size)``: the windows ``w`` at
    ``token_starts(len(tokens), n, block_size, seed)`` (``text_windows`` of the token stream)."""
    return text_windows(tokens, token_starts(tokens.numel(), n, block_size, seed), block_size)
