"""token_ids: a user's own text given as token ids (a tokenizer already applied), under a name of their
own (``datasets: {<name>: {source: token_ids, path: <file>}}``).

The file is a ``.npy`` of a 1-D integer array (``numpy.save``, read without pickle), or nanoGPT's flat
``uint16`` ``.bin``. The last ``test_fraction`` of the stream (default 0.1) is the test split; the
vocabulary is ``vocab_size`` (default: the largest id + 1), which a language model trained on it takes.
Text as UTF-8 is the ``corpus`` source (byte level, vocabulary 256).

Config keys: ``path`` (required), ``test_fraction``, ``vocab_size``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .store import DataError, file_digest, open_array

KIND = "text"
BYTES = False  # ids, not text: no pretrained checkpoint's tokenizer applies
CONFIG_KEYS = ("path", "test_fraction", "vocab_size")
REQUIRED = ("path",)


def read_ids(path: Path) -> np.ndarray:
    """The 1-D integer ids of ``path`` (``.npy``, or a flat uint16 ``.bin``), memory-mapped."""
    if not path.is_file():
        problem = "is a directory" if path.is_dir() else "does not exist"
        raise DataError(f"token_ids: {path} {problem}; set `path:` to a .npy of 1-D token ids or a uint16 .bin")
    try:
        ids = np.memmap(path, dtype=np.uint16, mode="r") if path.suffix == ".bin" else np.load(path, mmap_mode="r")
    except ValueError as err:  # not a .npy, or an object array (pickle refused)
        raise DataError(f"token_ids: {path} is not a .npy of token ids ({err})") from None
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer) or len(ids) < 2:
        raise DataError(f"token_ids: {path} holds {ids.dtype} of shape {ids.shape}; allowed: 1-D integer token ids")
    return ids


def prepare(name: str, cfg: dict, directory: Path, offline: bool) -> dict:
    """Write the ids of ``cfg['path']`` as ``train_x`` / ``test_x`` (int32, a type torch indexes) into
    ``directory``; return the manifest fields."""
    path = Path(cfg["path"])
    ids = read_ids(path)
    low, high = int(ids.min()), int(ids.max())
    vocab = int(cfg.get("vocab_size", high + 1))
    if low < 0 or high >= vocab or vocab > 2**31:
        raise DataError(f"token_ids: {path} holds ids {low}..{high}; allowed: 0..{vocab - 1} (vocab_size {vocab})")
    test_fraction = float(cfg.get("test_fraction", 0.1))
    cut = round((1.0 - test_fraction) * len(ids))
    if not 0 < cut < len(ids):
        raise DataError(f"token_ids: test_fraction {test_fraction} of {len(ids)} ids leaves a split empty")
    for split, part in (("train", ids[:cut]), ("test", ids[cut:])):
        open_array(directory, f"{split}_x", part.shape, "int32")[:] = part
    source = {"type": "token_ids", "path": str(path), "sha256": file_digest(path), "tokens": len(ids)}
    return {"kind": "text", "source": source, "vocab_size": vocab, "test_fraction": test_fraction}
