"""The tasks of a pretrained checkpoint: next-token prediction on windows of its own token stream.

``TokenTask`` tokenizes a prepared text dataset with the checkpoint's tokenizer; ``TokenIdTask``
reads token ids given directly (``data.tokenized.TokenIds``). Both cut windows of
``block_size + 1`` tokens from one stream per split (``WindowTask``).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..data.prepared import Prepared, text_windows
from ..data.store import SPLITS
from ..data.tokenized import TokenIds, text_from_bytes, tokenize_text
from .windows import WindowTask


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


class TokenIdTask(WindowTask):
    """Next-token prediction on token ids given directly (``TokenIds``): an example is a window of
    ``block_size`` tokens at a start drawn by ``token_starts``, no tokenizer involved (the
    ``tasks.Task`` interface, as ``models.hf.TokenTask``). With ``vocab_size``, a drawn window
    holding an id outside ``[0, vocab_size)`` raises ``ValueError``."""

    def __init__(self, data: TokenIds, block_size: int, vocab_size: int | None = None):
        if getattr(data, "kind", None) != "tokens":
            raise ValueError(f"TokenIdTask takes token ids (TokenIds); {data.name!r} holds {data.kind}")
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1; got {block_size}")
        self.data, self.block_size, self.vocab_size = data, block_size, vocab_size

    def stream(self, split: str) -> np.ndarray:
        if split not in SPLITS:
            raise ValueError(f"split {split!r}; allowed {SPLITS}")
        return getattr(self.data, f"{split}_x")

    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]:
        """``(x, y)``, each ``(n, block_size)`` int64: the windows of ``block_size + 1`` ids at the starts
        ``index``, read from the (memory-mapped) stream with numpy."""
        stream = self.stream(split)
        starts = index.cpu().numpy().astype(np.int64)
        if len(starts) and (starts.min() < 0 or starts.max() + self.block_size + 1 > len(stream)):
            raise ValueError(
                f"window starts must lie in [0, {len(stream) - self.block_size - 1}] for the "
                f"{split} stream of {len(stream)} tokens; got [{starts.min()}, {starts.max()}]"
            )
        windows = np.asarray(stream[starts[:, None] + np.arange(self.block_size + 1)]).astype(np.int64)
        if windows.size and (windows.min() < 0 or (self.vocab_size is not None and windows.max() >= self.vocab_size)):
            bad = int(windows.min()) if windows.min() < 0 else int(windows.max())
            raise ValueError(
                f"{self.data.source}: token id {bad} is outside the model's vocabulary "
                f"[0, {self.vocab_size}); were these ids made with this model's tokenizer?"
            )
        windows_t = torch.from_numpy(windows)  # (n, T+1)
        return windows_t[:, :-1], windows_t[:, 1:]
