"""Files that are either whole or refused: atomic writes and sha256 sidecars.

Every file a job writes goes through ``atomic_write`` (a temporary sibling renamed onto the
path once complete, removed on any failure, the failure re-raised naming the path), so a kill
or a full disk never leaves a partial file under its real name. Weights (``model.pt``, resume
checkpoints, snapshots) get a sidecar ``<file>.sha256`` holding the hex digest of their bytes;
``load_torch`` checks it before unpickling and loads with ``weights_only=True`` only, so a
crafted file can neither run code nor pass as a valid model.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import pickle
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SIDECAR = ".sha256"


class IntegrityError(ValueError):
    """A file that is corrupt, truncated, modified since written, or not of the expected kind."""


def file_digest(path: str | Path, algorithm: str = "sha256", chunk_bytes: int = 1 << 22) -> str:
    """Hex digest of the file at ``path``, read in chunks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_bytes):
            digest.update(chunk)
    return digest.hexdigest()


def sidecar(path: str | Path) -> Path:
    """``<path>.sha256``: where the digest of ``path`` is recorded."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR)


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; on success rename it onto ``path``.

    On any failure (a kill aside) the temporary file is removed and an ``OSError`` is re-raised
    with ``path`` and its cause in the message (e.g. ``No space left on device``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        if isinstance(error, OSError) and str(path) not in str(error):
            raise OSError(error.errno, f"writing {path} failed: {error.strerror or error}") from error
        raise


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_write(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | Path, value: Any) -> None:
    """Write ``value`` as indented JSON to ``path`` atomically."""
    write_text(path, json.dumps(value, indent=1) + "\n")


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path``; ``IntegrityError`` naming the file when it does not parse."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise IntegrityError(
            f"{path}: not valid JSON ({error}); the file is corrupt, delete it to start again"
        ) from None


def write_checked(path: str | Path, write: Callable[[Path], None]) -> None:
    """``write(tmp)`` then, atomically, ``path`` and its sha256 sidecar (the sidecar last)."""
    with atomic_write(path) as tmp:
        write(tmp)
        digest = file_digest(tmp)
    write_text(sidecar(path), f"{digest}  {Path(path).name}\n")


def verify(path: str | Path, required: bool = True) -> None:
    """Check ``path`` against its sidecar; ``IntegrityError`` naming it when they differ.

    Without a sidecar: an error when ``required`` (files the workflow wrote always have one),
    else nothing is checked (a user's own file).
    """
    path, recorded = Path(path), sidecar(path)
    if not recorded.is_file():
        if required:
            raise IntegrityError(f"{path}: no checksum file {recorded.name} beside it; write the file again")
        return
    expected = (recorded.read_text().split() or [""])[0]
    if file_digest(path) != expected:
        raise IntegrityError(
            f"{path}: sha256 differs from {recorded.name}; the file was modified or corrupted after it was "
            "written: delete it (and its .sha256) and recompute it"
        )


def _tensor_bytes(value: Any) -> int:
    """Bytes of the tensors in ``value`` (nested dicts, lists and tuples)."""
    if hasattr(value, "nbytes") and hasattr(value, "dtype"):
        return int(value.nbytes)
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list | tuple) else ()
    return sum(_tensor_bytes(item) for item in items)


def save_torch(path: str | Path, value: Any) -> None:
    """``torch.save(value)`` to ``path`` atomically, with its sha256 sidecar. torch's archive writer
    reports a short write as a ``RuntimeError`` ("unexpected pos …"); it becomes an ``OSError`` naming
    ``path``, ``ENOSPC`` ("No space left on device", with the space free and needed) when the disk
    cannot hold ``value``'s tensors."""
    import torch

    def write(tmp: Path) -> None:
        try:
            torch.save(value, tmp)
        except RuntimeError as error:
            free, needed = shutil.disk_usage(tmp.parent).free, _tensor_bytes(value)
            if free < needed:
                raise OSError(
                    errno.ENOSPC,
                    f"No space left on device ({free / 1e6:.3g} MB free in {tmp.parent}, "
                    f"about {needed / 1e6:.3g} MB needed)",
                ) from None
            raise OSError(errno.EIO, " ".join(str(error).split())[:200]) from None

    write_checked(path, write)


def load_torch(path: str | Path, map_location: Any = "cpu", checksum_required: bool = True) -> Any:
    """``torch.load(path, weights_only=True)`` after ``verify``; every failure one ``IntegrityError``
    naming ``path``: a missing sidecar (when required), a changed byte, a file holding objects other
    than tensors and plain Python types (refused unread: it could run code), or a damaged archive."""
    import torch

    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: no such file")
    verify(path, required=checksum_required)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        named = re.search(r"GLOBAL ([\w.]+)", str(error))
        if named is None:  # not an object the safe unpickler refused: damaged bytes
            raise IntegrityError(f"{path}: cannot read this file, it is truncated or corrupt (bad pickle)") from None
        raise IntegrityError(
            f"{path}: refused, it holds {named.group(1)}, an object other than tensors and plain Python values, "
            "and loading it could run code; scalemech loads weights only"
        ) from None
    except Exception as error:  # torch.load fails in many ways on a damaged file (RuntimeError, EOFError, zip)
        summary = " ".join(str(error).split())[:200]
        raise IntegrityError(
            f"{path}: cannot read this file, it is truncated or corrupt ({type(error).__name__}: {summary})"
        ) from None
