"""Text tokenized with a pretrained checkpoint's own tokenizer, cut into next-token windows.

Used for the Pythia suite (docs/science.md §5, E9): a split's text (the data layer has split
the corpus into train and test, ``data.text``) comes from a prepared byte stream, a local text
file or a Hugging Face dataset, is encoded with ``AutoTokenizer`` of the checkpoint
into one token stream, and ``token_pool`` draws ``n`` non-overlapping windows from it:
``x = w[:, :-1]``, ``y = w[:, 1:]`` (the batching of nanoGPT's ``get_batch``, without
overlap so the examples are distinct).

Token ids given directly (``TokenIds``, ``load_token_ids``) skip the tokenizer, for checkpoints
whose tokenizer is not in Hugging Face format. Their forms:

- a ``.npy`` of a 1-D integer array: one stream, split contiguously (``TOKEN_TRAIN_SHARE``);
  ``tasks.tokens.TokenIdTask`` cuts the same windows from it;
- a ``.npy`` of a 2-D integer array of shape ``(n, T)``: ``n`` documents (e.g. stories, each
  starting with BOS), split by rows; ``tasks.tokens.DocumentIdTask`` takes an example as a row's
  first ``block_size + 1`` tokens, so no example starts mid-document or crosses a row
  (``document_length`` reads ``T`` from the file's header, before anything else is loaded);
- nanoGPT's ``train.bin``/``val.bin`` (flat uint16 streams), cut as a 1-D ``.npy``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from .prepared import Prepared, text_windows, token_starts
from .store import SPLITS


def text_from_bytes(stream: Tensor) -> str:
    """The text of a prepared byte stream (uint8 tensor), undecodable bytes as U+FFFD."""
    if stream.dtype != torch.uint8 or stream.dim() != 1:
        raise ValueError(f"a byte stream is a 1-D uint8 tensor, got {stream.dtype} of shape {tuple(stream.shape)}")
    return bytes(stream.cpu().numpy()).decode("utf-8", errors="replace")


TOKEN_IDS_HINT = (
    "give token ids instead of text: a .npy of a 1-D integer array (numpy.save('ids.npy', ids)) or of "
    "documents as a 2-D integer array (n, T), or nanoGPT's train.bin/val.bin (flat uint16 arrays, their "
    "directory or train.bin as --data)"
)


@lru_cache(maxsize=8)
def load_tokenizer(checkpoint: str, revision: str | None = None, local_files_only: bool = False):
    """``AutoTokenizer`` of ``checkpoint`` (hub name or directory), cached per process, never running code
    shipped with it (``trust_remote_code=False``: a tokenizer that needs its own code does not load);
    ``ValueError`` saying how to give a tokenizer or token ids when it has none that loads."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(
            checkpoint, revision=revision or "main", local_files_only=local_files_only, trust_remote_code=False
        )
    except Exception as err:  # a missing tokenizer surfaces as OSError, ValueError or ImportError
        summary = " ".join(str(err).split())[:160]
        raise ValueError(
            f"text needs a tokenizer, and {checkpoint!r} has none that loads ({type(err).__name__}: {summary}); "
            f"pass --tokenizer NAME_OR_DIR, or {TOKEN_IDS_HINT}"
        ) from None


def tokenize_text(text: str, checkpoint: str, revision: str | None = None, local_files_only: bool = False) -> Tensor:
    """Token ids of ``text`` as one stream, shape ``(N,)`` int64, no special tokens added."""
    tokenizer = load_tokenizer(checkpoint, revision, local_files_only)
    ids = tokenizer(text, add_special_tokens=False, return_attention_mask=False, verbose=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.int64)


TEXT_SLACK = 2
"""``text_file_tokens`` reads this many times the tokens its windows need (room for random starts)."""
BYTES_PER_TOKEN = 4
"""A first guess of the text bytes per token (English BPE: about 4), refined by reading more."""


def _head_tokens(
    read_head: Callable[[int], bytes],
    size: int,
    wanted: int,
    tokenizer: str,
    revision: str | None,
    local_files_only: bool,
) -> np.ndarray:
    """The first ``wanted`` tokens of a byte stream of ``size`` bytes (fewer if it is shorter), from
    its first ``wanted·BYTES_PER_TOKEN`` bytes (``read_head(k)``), doubled until they hold them."""
    read = wanted * BYTES_PER_TOKEN
    while True:
        tokens = tokenize_text(read_head(read).decode("utf-8", errors="replace"), tokenizer, revision, local_files_only)
        if len(tokens) >= wanted or read >= size:
            return tokens[:wanted].numpy()
        read *= 2


def text_file_tokens(
    path: str | Path, windows: int, block_size: int, tokenizer: str, revision: str | None, local_files_only: bool
) -> TokenIds:
    """Token ids of the head of a text file, enough for ``windows`` windows of ``block_size + 1``
    tokens in each split: the first ``N = 2·TEXT_SLACK·windows·(block_size + 1)`` tokens (fewer for
    a shorter file), the first half the train split and the second the test split.

    Only a prefix is read and tokenized: ``N·BYTES_PER_TOKEN`` bytes, doubled until it holds ``N``
    tokens or the file ends (utf-8, undecodable bytes as U+FFFD).
    """
    path = Path(path)

    def read_head(size: int) -> bytes:
        with path.open("rb") as f:
            return f.read(size)

    wanted = 2 * TEXT_SLACK * windows * (block_size + 1)
    ids = _head_tokens(read_head, path.stat().st_size, wanted, tokenizer, revision, local_files_only)
    half = len(ids) // 2
    return TokenIds(path.name, ids[:half], ids[half:], f"{path} (first {len(ids)} tokens of {tokenizer!r})")


def prepared_text_tokens(
    data: Prepared, windows: int, block_size: int, tokenizer: str, revision: str | None, local_files_only: bool
) -> TokenIds:
    """Token ids of the head of each split of a prepared text dataset: the first
    ``TEXT_SLACK·windows·(block_size + 1)`` tokens of its train and of its test byte stream, read
    and tokenized as ``text_file_tokens`` reads a file (only as far as they need)."""
    if data.kind != "text":
        raise ValueError(f"a tokenizer takes text data; {data.name!r} holds {data.kind}")
    wanted = TEXT_SLACK * windows * (block_size + 1)
    streams = {}
    for split in SPLITS:
        stream = getattr(data, f"{split}_x")  # (N,) uint8, memory-mapped
        streams[split] = _head_tokens(
            lambda size, stream=stream: bytes(stream[:size].numpy()),
            len(stream),
            wanted,
            tokenizer,
            revision,
            local_files_only,
        )
    sizes = ", ".join(f"{len(ids)} {split}" for split, ids in streams.items())
    return TokenIds(
        data.name, streams["train"], streams["test"], f"{data.name} (first tokens of {tokenizer!r}: {sizes})"
    )


def token_pool(tokens: Tensor, n: int, block_size: int, seed: int) -> tuple[Tensor, Tensor]:
    """``(x, y) = (w[:, :-1], w[:, 1:])``, each ``(n, block_size)``: the windows ``w`` at
    ``token_starts(len(tokens), n, block_size, seed)`` (``text_windows`` of the token stream)."""
    return text_windows(tokens, token_starts(tokens.numel(), n, block_size, seed), block_size)


# ----------------------------------------------------------------------------- token ids given directly

NANOGPT_FILES = {"train": "train.bin", "test": "val.bin"}
"""nanoGPT's ``prepare.py`` output: the token ids of each split as a flat uint16 array (no header)."""
NANOGPT_DTYPE = np.uint16
NPY_MAGIC = b"\x93NUMPY"
"""The first bytes of every ``.npy`` file."""
TOKEN_TRAIN_SHARE = 0.9
"""A single ``.npy`` stream is split contiguously: its first 90 % is the train split, the rest the test
split (as the byte-level text datasets split their text); a ``.npy`` of documents ``(n, T)`` is split
by rows: its first ``int(n · TOKEN_TRAIN_SHARE)`` rows are the train split."""


@dataclass
class TokenIds:
    """Train and test token ids (integer numpy arrays, memory-mapped), with the ``Prepared`` fields a
    task reads (``kind`` is ``"tokens"``): one stream per split (1-D), or documents, one per row of a
    2-D array (``documents``)."""

    name: str
    train_x: np.ndarray  # (N_train,) integer token ids, or (n_train, T) documents
    test_x: np.ndarray  # (N_test,), or (n_test, T)
    source: str  # what was read, for messages
    kind: str = "tokens"
    train_y: None = None
    test_y: None = None
    manifest: dict = field(default_factory=dict)
    vocab_size: int | None = None

    @property
    def documents(self) -> bool:
        """Whether the splits are documents (2-D, one per row) rather than streams."""
        return self.train_x.ndim == 2


def is_token_ids(path: str | Path) -> bool:
    """Whether ``path`` names token ids by its form: a ``.npy`` file, nanoGPT's ``train.bin`` or ``val.bin``,
    or a directory holding both (the content is checked by ``load_token_ids``)."""
    path = Path(path)
    if path.is_dir():
        return all((path / name).is_file() for name in NANOGPT_FILES.values())
    return path.is_file() and (path.suffix == ".npy" or path.name in NANOGPT_FILES.values())


def _nanogpt_stream(path: Path) -> np.ndarray:
    size = path.stat().st_size
    if size == 0 or size % np.dtype(NANOGPT_DTYPE).itemsize:
        raise ValueError(f"{path}: {size} bytes is not a nanoGPT token file (a flat array of uint16 token ids)")
    return np.memmap(path, dtype=NANOGPT_DTYPE, mode="r")


def document_length(path: str | Path) -> int | None:
    """``T`` of a ``.npy`` of documents (a 2-D integer array ``(n, T)``), read from its header only
    (memory-mapped); None for anything else (a 1-D stream, another file, an unreadable one: what it
    is, ``load_token_ids`` says)."""
    path = Path(path)
    if path.suffix != ".npy" or not path.is_file():
        return None
    try:
        ids = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError):
        return None
    return int(ids.shape[1]) if ids.ndim == 2 and np.issubdtype(ids.dtype, np.integer) else None


def load_token_ids(path: str | Path) -> TokenIds:
    """Token ids from ``path``, memory-mapped (nothing is read until windows are drawn):

    - a ``.npy`` file holding a 1-D integer array: one stream, split contiguously into train
      (the first ``TOKEN_TRAIN_SHARE``) and test (the rest);
    - a ``.npy`` file holding a 2-D integer array ``(n, T)``: ``n`` documents, split by rows, the
      first ``int(n · TOKEN_TRAIN_SHARE)`` train and the rest test (``ValueError`` when either
      split would have no row);
    - nanoGPT's ``train.bin`` and ``val.bin`` (uint16, no header): a directory holding both, or
      the path of either one with the other beside it; ``val.bin`` is the test split.

    Anything else is refused with ``ValueError`` (a missing partner file: ``FileNotFoundError``).
    """
    path = Path(path)
    if path.suffix == ".npy" and path.is_file():
        try:
            ids = np.load(path, mmap_mode="r", allow_pickle=False)
        except ValueError:  # not a .npy file at all, or an array of Python objects (numpy would unpickle it)
            with path.open("rb") as f:
                npy = f.read(len(NPY_MAGIC)) == NPY_MAGIC
            what = "an array of Python objects, which is never unpickled" if npy else "not a .npy file (no .npy header)"
            raise ValueError(f"{path}: {what}; give a .npy of integer token ids (numpy.save of an int array)") from None
        if ids.ndim not in (1, 2) or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(
                f"{path}: a .npy of token ids must hold a 1-D integer array (one stream) or a 2-D one "
                f"(n documents of T tokens); this one holds {ids.dtype} of shape {ids.shape}"
            )
        cut = int(len(ids) * TOKEN_TRAIN_SHARE)
        if ids.ndim == 2 and not 0 < cut < len(ids):
            raise ValueError(
                f"{path}: documents of shape {ids.shape} split by rows give {cut} train and "
                f"{len(ids) - cut} test documents ({TOKEN_TRAIN_SHARE:.0%} train); each split needs at least one"
            )
        return TokenIds(path.name, ids[:cut], ids[cut:], str(path))
    directory = path if path.is_dir() else path.parent
    if path.is_dir() or path.name in NANOGPT_FILES.values():
        files = {split: directory / name for split, name in NANOGPT_FILES.items()}
        missing = [str(f) for f in files.values() if not f.is_file()]
        if missing:
            raise FileNotFoundError(
                f"nanoGPT token data need both train.bin and val.bin in {directory}; missing {', '.join(missing)}"
            )
        streams = {split: _nanogpt_stream(f) for split, f in files.items()}
        return TokenIds(directory.name, streams["train"], streams["test"], str(directory))
    raise ValueError(f"{path}: neither a .npy of token ids nor nanoGPT's train.bin/val.bin")
