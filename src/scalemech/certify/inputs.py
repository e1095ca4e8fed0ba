"""What ``certify`` was given: the model (a scalemech ``model.pt`` or a Hugging Face decoder LM, judged
by its ``config.json`` before any weight loads) and the data (a prepared dataset, token ids as one
stream or as documents, or a text file, read only as far as the pools need). Documents (a 2-D
``.npy``) fix a Hugging Face model's default block size, so their shape is read first
(``data.tokenized.document_length``)."""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

from ..data import DataError, load_prepared, prepare_dataset
from ..data.tokenized import (
    document_length,
    is_token_ids,
    load_token_ids,
    prepared_text_tokens,
    text_file_tokens,
)
from ..models import FAMILIES

HF_BLOCK_SIZE = 1024
"""Tokens per example of a Hugging Face model when ``--block-size`` is not given: at most this
(``max_position_embeddings`` can be 32k or more, far beyond what a pool of examples needs)."""


def checkpoint_spec(
    checkpoint: str, family: str | None, block_size: int | None, tokenizer: str | None, data: str | None = None
) -> dict[str, Any] | None:
    """The ``hf`` model spec of ``checkpoint``, None for a scalemech ``model.pt``. Reads only its
    ``config.json`` (``models.hub.decoder_config``): a missing path, a file that is neither a directory
    nor a ``.pt``, a config that is not a JSON object, one that needs the checkpoint's own code
    (``auto_map``) or a model that is not a decoder-only causal LM is refused here, before the data and
    the weights are loaded; so is ``--family hf`` on a ``.pt`` file. The
    weights load in their own dtype; ``block_size`` defaults to ``min(max_position_embeddings,
    HF_BLOCK_SIZE)``, and for ``data`` that are documents of ``T`` tokens (a 2-D ``.npy``, its
    shape read from the header: ``document_length``) to ``min(T - 1, max_position_embeddings,
    HF_BLOCK_SIZE)``, an example being a document's first ``block_size + 1`` tokens."""
    from ..models.hub import decoder_config, hub_unreachable

    path = Path(checkpoint)
    trained = [name for name, known in FAMILIES.items() if known.trained]  # their models are model.pt files
    if path.suffix == ".pt" and family in (None, *trained):
        return None  # a family other than its spec's is refused once it is loaded (measurement.certify)
    if path.suffix == ".pt" and path.is_file():
        raise ValueError(
            f"--family {family} needs a Hugging Face checkpoint (directory or hub name); {checkpoint!r} is a "
            "scalemech model.pt: give its own family or none"
        )
    if family not in (None, "hf"):
        raise ValueError(f"--family {family} needs a scalemech model.pt, got {checkpoint!r}")
    config = decoder_config(checkpoint, None, path.is_dir())  # an uncached name without network: refused here
    local = path.is_dir() or hub_unreachable() is not None  # from the cache, with no download to wait for
    positions = config.get("max_position_embeddings") or config.get("n_positions") or HF_BLOCK_SIZE
    length = document_length(data) if data is not None else None
    default = min(positions, HF_BLOCK_SIZE) if length is None else max(1, min(length - 1, positions, HF_BLOCK_SIZE))
    return {
        "family": "hf",
        "checkpoint": checkpoint,
        "local_files_only": local,
        "dtype": "auto",
        "block_size": block_size or default,
        "tokenizer": tokenizer or checkpoint,
    }


def checkpoint_name(checkpoint: str) -> str:
    """What names a checkpoint in its pools' seeds: a local path resolved (``./fx/llama`` and ``fx/llama``
    draw the same pools), a hub name as given."""
    path = Path(checkpoint).expanduser()
    return str(path.resolve()) if path.exists() else checkpoint


DATA_FORMS = (
    "a prepared dataset directory (with manifest.json), a UTF-8 text file, a .npy of token ids "
    "(1-D integer array), a .npy of documents (2-D integer array (n, T), one document a row), or "
    "nanoGPT's train.bin/val.bin (their directory, or train.bin with val.bin beside it)"
)


def _local(hf_spec: dict[str, Any]) -> bool:
    """Whether the tokenizer is read from disk only: a directory, or a hub name with no download possible."""
    from ..models.hub import hub_unreachable

    return Path(hf_spec["tokenizer"]).is_dir() or hub_unreachable() is not None


def read_data(data: str, scratch: Path, hf_spec: dict[str, Any] | None, pool: int, option: str = "--data"):
    """A prepared dataset directory (for a Hugging Face model, a text one becomes the head of each
    split that ``pool`` windows need, in the tokenizer's ids: ``data.tokenized.prepared_text_tokens``);
    token ids (``data.tokenized.load_token_ids``: a ``.npy`` stream or documents, or nanoGPT's
    ``train.bin``/``val.bin``);
    or a UTF-8 text file (judged by its first MiB): for a Hugging Face model, the head of it that
    ``pool`` windows per split need (``data.tokenized.text_file_tokens``), else prepared here as a
    byte-level corpus. Anything else (a binary file, a directory of none of these, a FIFO or a device) is
    refused (a FIFO or a device is never read); every refusal names ``option``, the option that gave ``data``."""
    try:
        return _read(Path(data), scratch, hf_spec, pool, f"{option} {data!r}")
    except (ValueError, DataError) as error:
        if not str(error).startswith(option):
            error.args = (f"{option}: {error}", *error.args[1:])
        raise


def _read(path: Path, scratch: Path, hf_spec: dict[str, Any] | None, pool: int, given: str):
    """``read_data`` of ``path``; ``given``: the option and the path, as refusals name them."""
    if (path / "manifest.json").is_file():
        prepared = load_prepared(path)
        if hf_spec is not None and prepared.kind == "text":
            tokenizer, local = hf_spec["tokenizer"], _local(hf_spec)
            return prepared_text_tokens(prepared, pool, hf_spec["block_size"], tokenizer, None, local)
        return prepared
    if is_token_ids(path):
        return load_token_ids(path)
    if path.is_file():
        with path.open("rb") as f:
            head = f.read(1 << 20)
        try:
            codecs.getincrementaldecoder("utf-8")().decode(head)  # not final: a character cut at 1 MiB is fine
            binary = b"\0" in head
        except UnicodeDecodeError:
            binary = True
        if binary:
            raise ValueError(
                f"{given} is a binary file, not UTF-8 text, a .npy of token ids or nanoGPT's train.bin/val.bin; "
                f"give {DATA_FORMS}"
            )
        if hf_spec is not None:
            tokenizer, local = hf_spec["tokenizer"], _local(hf_spec)
            return text_file_tokens(path, pool, hf_spec["block_size"], tokenizer, None, local)
        prepare_dataset("corpus", {"path": str(path)}, scratch / "corpus")
        return load_prepared(scratch / "corpus")
    if not path.exists():
        raise FileNotFoundError(f"{given} does not exist; give {DATA_FORMS}")
    what = "a directory holding no manifest.json nor train.bin and val.bin" if path.is_dir() else "no regular file"
    raise ValueError(f"{given} is {what}; give {DATA_FORMS}")
