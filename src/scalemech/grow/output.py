"""What ``grow`` writes: a plain Hugging Face checkpoint directory and its ``growth.json``.

``--out`` is checked before any work (``check_out``): never the source checkpoint, nothing inside it
or holding it, never a directory of other files or another checkpoint's grown output, and writable.
The output is written whole or not at all (``write_output``): into a temporary sibling directory,
``growth.json`` last, then swapped into place by two renames; a failure or a kill before the swap
leaves ``--out`` as it was (its resume states included), so no directory claims a success it lacks.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel

from ..core.integrity import file_digest, read_json, write_failure, write_json
from ..data.tokenized import load_tokenizer
from ..models.hub import WEIGHT_SUFFIXES, config_file
from ..training.checkpoints import COMPLETE, lock_path

GROWTH_JSON = "growth.json"
STATE_DIR = ".grow-state"
"""Under ``--out``: the arms' resume states while ``grow`` runs (removed once the model is written)."""
RUN_JSON = "run.json"
"""Under ``STATE_DIR``: the identity of the run the states belong to (``resume``)."""


def source_directory(checkpoint: str, revision: str | None, local_files_only: bool) -> Path:
    """The directory holding the checkpoint's files (its own, or its snapshot in the Hugging Face cache)."""
    return config_file(checkpoint, revision, local_files_only).parent


def files_digest(paths: Iterable[Path]) -> dict[str, Any]:
    """``{"files": {name: sha256}, "sha256": …}``: each file's digest, and the combined one hashing the
    ``name:sha256`` lines in name order."""
    files = {path.name: file_digest(path) for path in sorted(paths)}
    combined = hashlib.sha256("".join(f"{name}:{digest}\n" for name, digest in files.items()).encode()).hexdigest()
    return {"files": files, "sha256": combined}


def source_digest(directory: Path) -> dict[str, Any]:
    """``files_digest`` of the weight files in the checkpoint ``directory``."""
    return files_digest(p for p in directory.iterdir() if p.is_file() and p.name.endswith(WEIGHT_SUFFIXES))


def data_digest(data: str) -> str:
    """The sha256 of what ``--data`` names: the file's, or ``files_digest``'s of every file directly in
    the directory."""
    path = Path(data)
    return files_digest(p for p in path.iterdir() if p.is_file())["sha256"] if path.is_dir() else file_digest(path)


def _within(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def check_out(out: Path, source: Path, source_sha256: str) -> None:
    """Refuse, before any work, an ``--out`` (symlinks followed) that is the checkpoint ``source``
    directory, lies inside it or holds it; that is a file; that holds files other than a previous
    ``grow`` output of this same source (``growth.json``'s sha256) or its resume states; or where
    nothing can be written. Every message names ``--out`` and what is allowed."""
    where = f"--out {str(out)!r}"
    real, source = out.resolve(), source.resolve()
    if _within(real, source) or _within(source, real):
        relation = "is" if real == source else ("lies inside" if _within(real, source) else "holds")
        raise ValueError(f"{where} {relation} the checkpoint directory {str(source)!r}; give a new or empty directory")
    if real.exists() and not real.is_dir():
        raise ValueError(f"{where} is a file; give a new or empty directory")
    if real.is_dir():
        _check_previous(where, real, source_sha256)
    nearest = next(p for p in (real, *real.parents) if p.exists())  # where out is made, or out itself
    for place in {nearest, real.parent} if real.exists() else {nearest}:  # the parent takes the final swap
        if not os.access(place, os.W_OK | os.X_OK):
            raise PermissionError(f"{where}: {str(place)!r} is not writable; give a directory you can write")


def _check_previous(where: str, out: Path, source_sha256: str) -> None:
    """An existing ``--out`` holds nothing, or a previous output or resume state of this source."""
    ours = {STATE_DIR, GROWTH_JSON, lock_path(out / STATE_DIR).name}
    names = {p.name for p in out.iterdir()}
    if not names - ours:
        return
    if (out / GROWTH_JSON).is_file():
        try:
            grown_from = read_json(out / GROWTH_JSON)["source"]["sha256"]
        except (ValueError, KeyError, TypeError):
            grown_from = None
        if grown_from == source_sha256:
            return
        raise ValueError(
            f"{where} holds the output of growing another checkpoint (its growth.json's source sha256 differs); "
            "give a new or empty directory, or that output's own source"
        )
    if (out / STATE_DIR).is_dir():
        return  # an interrupted run's resume states (``resume.check_run`` compares its options)
    shown = ", ".join(sorted(names - ours)[:3])
    raise ValueError(f"{where} holds other files ({shown}); give a new or empty directory")


def write_output(out: Path, write: Callable[[Path], None], needed: int | None = None) -> None:
    """``write(directory)`` into a temporary sibling of ``out``, then swap it into place: ``out`` (its
    resume states and lock file with it) is renamed aside, the new directory renamed to ``out``, the old
    one removed. Any failure before the swap removes the temporary directory and leaves ``out`` as it was;
    a failed write (``integrity.write_failure``: an ``OSError``, or safetensors' or torch's error for want
    of room, with the room there is and the about ``needed`` bytes) is one ``OSError`` naming ``out``."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.writing-", dir=out.parent))
    try:
        write(tmp)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        failure = write_failure(error, out.parent, needed)
        if failure is not None:
            raise OSError(
                failure[0],
                f"writing the grown checkpoint to {out} failed ({failure[1]}); {out} is as it was and its resume "
                "states are kept: make room or fix the cause, then rerun the same command",
            ) from None
        raise
    aside = out.with_name(f".{out.name}.replaced-{os.getpid()}")
    if out.exists():
        os.rename(out, aside)
    os.rename(tmp, out)
    shutil.rmtree(aside, ignore_errors=True)


def write_checkpoint(
    model: PreTrainedModel, directory: Path, dtype: torch.dtype, tokenizer: tuple[str, bool] | None
) -> bool:
    """``model`` in ``dtype`` as safetensors with its config into ``directory`` (``save_pretrained``; tied
    embeddings stay tied), and the tokenizer ``(name, local_files_only)`` beside it when one loads;
    whether it did."""
    model.to(dtype).save_pretrained(directory, safe_serialization=True)
    if tokenizer is None:
        return False
    try:
        load_tokenizer(tokenizer[0], None, tokenizer[1]).save_pretrained(directory)
    except ValueError:  # the checkpoint has no tokenizer (token ids were given)
        return False
    return True


def write_growth(directory: Path, record: dict[str, Any]) -> Path:
    """``directory/growth.json`` (atomic)."""
    write_json(directory / GROWTH_JSON, record, "the run's record")
    return directory / GROWTH_JSON


def tidy(out: Path, created: bool) -> None:
    """After a run, as it ends: without an arm's resume state to keep (a ``step-*.pt`` or a finished
    arm), ``out``'s resume directory and lock file go, and ``out`` itself when the run ``created`` it
    and that leaves it empty (a refused run leaves no trace)."""
    state = out / STATE_DIR
    if any(state.glob("*/step-*.pt")) or any(state.glob(f"*/{COMPLETE}")):
        return
    shutil.rmtree(state, ignore_errors=True)
    lock_path(state).unlink(missing_ok=True)
    if created and out.is_dir() and not any(out.iterdir()):
        out.rmdir()
