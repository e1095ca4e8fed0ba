"""The tasks of a pretrained checkpoint: next-token prediction on windows of its own token stream,
or on the starts of documents.

``TokenTask`` tokenizes a prepared text dataset with the checkpoint's tokenizer; ``TokenIdTask``
reads token ids given directly (``data.tokenized.TokenIds``). Both cut windows of
``block_size + 1`` tokens from one stream per split (``WindowTask``). ``DocumentIdTask`` reads
documents given directly (a ``TokenIds`` of 2-D splits, one document a row): an example is a row's
first ``block_size + 1`` tokens, so it starts where its document starts (with its BOS) and never
crosses into another.
"""

from __future__ import annotations

from typing import Any

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
        windows = np.asarray(stream[starts[:, None] + np.arange(self.block_size + 1)])
        return next_token_pair(windows, self.vocab_size, self.data.source)

    def used_ids(self, split: str) -> np.ndarray:
        """Every id an example of ``split`` can hold: its whole stream."""
        return self.stream(split)


def outside_vocabulary(ids: np.ndarray, vocab_size: int | None) -> int | None:
    """An id of the integer array ``ids`` outside ``[0, vocab_size)`` (below 0 without ``vocab_size``),
    as a Python int (so ``2**63 + 5`` of a uint64 array stays positive), or None."""
    if not ids.size:
        return None
    low, high = int(ids.min()), int(ids.max())
    if low < 0:
        return low
    return high if vocab_size is not None and high >= vocab_size else None


def check_vocabulary(ids: np.ndarray, vocab_size: int | None, source: str) -> None:
    """``ValueError`` naming ``source`` and the id when ``ids`` hold one outside the vocabulary."""
    bad = outside_vocabulary(ids, vocab_size)
    if bad is not None:
        raise ValueError(
            f"{source}: token id {bad} is outside the model's vocabulary "
            f"[0, {vocab_size}); were these ids made with this model's tokenizer?"
        )


def next_token_pair(windows: np.ndarray, vocab_size: int | None, source: str) -> tuple[Tensor, Tensor]:
    """``(x, y) = (w[:, :-1], w[:, 1:])`` as int64 of integer windows ``w`` (n, block_size + 1);
    ``ValueError`` naming ``source`` when an id lies outside ``[0, vocab_size)`` (``check_vocabulary``)."""
    check_vocabulary(windows, vocab_size, source)
    windows_t = torch.from_numpy(windows.astype(np.int64))  # (n, block_size + 1)
    return windows_t[:, :-1], windows_t[:, 1:]


class DocumentIdTask:
    """Next-token prediction on documents given directly (``TokenIds`` with 2-D splits ``(n, T)``,
    one document a row, e.g. stories each starting with BOS): example ``r`` of a split is its row
    ``r``'s first ``block_size + 1`` tokens, ``x = row[:block_size]``, ``y = row[1:block_size + 1]``.
    No example starts mid-document or crosses a row; two examples overlap only when they are the
    same row. ``block_size + 1 <= T`` is required; with ``vocab_size``, a drawn example holding an
    id outside ``[0, vocab_size)`` raises ``ValueError`` (as ``TokenIdTask``)."""

    overlaps_per_example = 1  # an example overlaps only itself: the same row

    def __init__(self, data: TokenIds, block_size: int, vocab_size: int | None = None):
        if getattr(data, "kind", None) != "tokens" or data.train_x.ndim != 2:
            raise ValueError(
                f"DocumentIdTask takes documents (TokenIds of 2-D splits); {data.name!r} holds "
                f"{getattr(data, 'kind', None)} of shape {getattr(data.train_x, 'shape', None)}"
            )
        if block_size < 1:
            raise ValueError(f"block_size must be at least 1; got {block_size}")
        length = data.train_x.shape[1]
        if block_size + 1 > length:
            raise ValueError(
                f"{data.source}: block_size {block_size} needs documents of block_size + 1 = {block_size + 1} "
                f"tokens, these have T = {length}; the largest allowed block size is T - 1 = {length - 1}"
            )
        self.data, self.block_size, self.vocab_size = data, block_size, vocab_size

    def rows(self, split: str) -> np.ndarray:
        """The documents of ``split``, ``(n, T)`` (memory-mapped)."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}; allowed {SPLITS}")
        return getattr(self.data, f"{split}_x")

    def spec_keys(self) -> dict[str, Any]:
        return {}

    def count(self, split: str) -> int:
        """Documents (rows) of ``split``: one example each."""
        return len(self.rows(split))

    def draw(self, split: str, n: int, seed: int) -> Tensor:
        """``n`` distinct rows of ``split`` in a random order seeded by ``seed``."""
        rows = self.count(split)
        if not 1 <= n <= rows:
            raise ValueError(
                f"cannot draw n={n} documents from the {split} split of {rows} documents "
                f"({self.data.source}); need 1 <= n <= {rows}"
            )
        return torch.randperm(rows, generator=torch.Generator().manual_seed(seed))[:n]

    def examples(self, split: str, index: Tensor) -> tuple[Tensor, Tensor]:
        """``(x, y)``, each ``(n, block_size)`` int64: the first ``block_size + 1`` ids of the rows
        ``index``, read from the (memory-mapped) array with numpy."""
        rows = self.rows(split)
        picked = index.cpu().numpy().astype(np.int64)
        if len(picked) and (picked.min() < 0 or picked.max() >= len(rows)):
            raise ValueError(
                f"document rows must lie in [0, {len(rows) - 1}] for the {split} split of {len(rows)} "
                f"documents; got [{picked.min()}, {picked.max()}]"
            )
        windows = np.asarray(rows[picked, : self.block_size + 1]).reshape(-1, self.block_size + 1)
        return next_token_pair(windows, self.vocab_size, self.data.source)

    def used_ids(self, split: str) -> np.ndarray:
        """Every id an example of ``split`` can hold: each document's first ``block_size + 1``."""
        return self.rows(split)[:, : self.block_size + 1]

    def overlaps(self, index: Tensor, others: Tensor) -> Tensor:
        """Whether each row of ``index`` is one of ``others``."""
        return (index[:, None] == others[None, :]).any(1)

    def sample(self, split: str, n: int, generator: torch.Generator) -> Tensor:
        """``n`` rows drawn uniformly with replacement, for training batches."""
        return torch.randint(self.count(split), (n,), generator=generator)

    def to_input(self, x: Tensor) -> Tensor:
        return x.long()
