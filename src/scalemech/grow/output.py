"""What ``grow`` writes: a plain Hugging Face checkpoint directory and its ``growth.json``."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from ..core.integrity import file_digest, write_json
from ..data.tokenized import load_tokenizer
from ..models.hub import config_file
from ..training.checkpoints import lock_path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
GROWTH_JSON = "growth.json"
STATE_DIR = ".grow-state"
"""Under ``--out``: the arms' resume states while ``grow`` runs (removed once the model is written)."""


def check_out(out: Path) -> None:
    """Refuse, before any work, an ``--out`` that is a file or a directory holding anything but a
    previous ``grow``'s output or resume states; create it (so an unwritable place fails now)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file; give a new or empty directory")
    if out.is_dir():
        ours = (STATE_DIR, GROWTH_JSON, lock_path(out / STATE_DIR).name)
        foreign = [p.name for p in out.iterdir() if p.name not in ours]
        if foreign and not (out / GROWTH_JSON).is_file() and not (out / STATE_DIR).is_dir():
            names = ", ".join(sorted(foreign)[:3])
            raise ValueError(f"--out {str(out)!r} holds other files ({names}); give a new or empty directory")
    out.mkdir(parents=True, exist_ok=True)


def source_digest(checkpoint: str, revision: str | None, local_files_only: bool) -> dict[str, Any]:
    """``{"files": {name: sha256}, "sha256": …}`` of the checkpoint's weight files (its directory, or its
    snapshot in the Hugging Face cache); the combined digest hashes the ``name:sha256`` lines."""
    directory = config_file(checkpoint, revision, local_files_only).parent
    files = {
        path.name: file_digest(path)
        for path in sorted(directory.iterdir())
        if path.is_file() and path.name.endswith(WEIGHT_SUFFIXES)
    }
    combined = hashlib.sha256("".join(f"{name}:{digest}\n" for name, digest in files.items()).encode()).hexdigest()
    return {"files": files, "sha256": combined}


def write_checkpoint(model: PreTrainedModel, out: Path, dtype: torch.dtype, tokenizer: tuple[str, bool] | None) -> bool:
    """``model`` in ``dtype`` as safetensors with its config into ``out`` (``save_pretrained``), and the
    tokenizer ``(name, local_files_only)`` beside it when one loads; whether it did."""
    model.to(dtype).save_pretrained(out, safe_serialization=True)
    if tokenizer is None:
        return False
    try:
        load_tokenizer(tokenizer[0], None, tokenizer[1]).save_pretrained(out)
    except ValueError:  # the checkpoint has no tokenizer (token ids were given)
        return False
    return True


def write_growth(out: Path, record: dict[str, Any]) -> Path:
    """``out/growth.json`` (atomic)."""
    write_json(out / GROWTH_JSON, record)
    return out / GROWTH_JSON
