"""Files that are either whole or refused: atomic writes and sha256 sidecars.

Every file a job writes goes through ``atomic_write`` (a temporary sibling renamed onto the
path once complete, removed on any failure, the failure re-raised naming the path), so a kill
or a full disk never leaves a partial file under its real name. A write that fails for want of room
(a full disk, a quota, a file-size limit: ``ROOM_ERRORS``), however the writer reports it (an
``OSError``, safetensors' "os error 28", torch's "unexpected pos"), becomes one ``OSError`` naming the
path, what there is and what was needed (``room``). Weights (``model.pt``, resume
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
ROOM_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""The errnos of a write that failed for want of room: a full disk, a quota, a file-size limit."""


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


def size_text(size: int) -> str:
    """``size`` bytes in kB, MB, GB or TB (powers of 1000), three significant digits."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if size >= scale:
            return f"{size / scale:.3g} {unit}"
    return f"{size / 1e3:.3g} kB"


def file_size_limit() -> int | None:
    """Bytes one file may hold in this process (``ulimit -f``: ``RLIMIT_FSIZE``); None when unlimited."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if limit == resource.RLIM_INFINITY else int(limit)


def room_errno(error: BaseException, directory: Path, needed: int | None = None) -> int | None:
    """The ``ROOM_ERRORS`` errno of a write of ``needed`` bytes under ``directory`` that failed with
    ``error``, or None: an ``OSError``'s own; the one safetensors names ("os error 28"); for torch's
    archive writer, which says only "unexpected pos", the limit ``needed`` exceeds (the file-size limit,
    then the free space)."""
    if isinstance(error, OSError):
        return error.errno if error.errno in ROOM_ERRORS else None
    named = re.search(r"os error (\d+)", str(error))
    if named is not None:
        return int(named.group(1)) if int(named.group(1)) in ROOM_ERRORS else None
    if "unexpected pos" not in str(error) or needed is None:
        return None
    limit = file_size_limit()
    if limit is not None and needed > limit:
        return errno.EFBIG
    return errno.ENOSPC if needed > shutil.disk_usage(directory).free else None


def room_reason(code: int, directory: Path, needed: int | None = None) -> str:
    """What the system says of ``code`` (one of ``ROOM_ERRORS``), with the room there is (the file-size
    limit, or the space free under ``directory``), when known the ``needed`` bytes, and what to do."""
    limit = file_size_limit() if code == errno.EFBIG else None
    if code == errno.EFBIG:
        there = f"the file-size limit, ulimit -f, is {size_text(limit)}" if limit else "the file system's largest file"
    else:
        there = f"{size_text(shutil.disk_usage(directory).free)} free in {directory}"
    remedy = "raise it" if limit else "write elsewhere" if code == errno.EFBIG else "free space there"
    return f"{os.strerror(code)} ({there}{f', about {size_text(needed)} needed' if needed else ''}: {remedy})"


def write_failure(error: BaseException, directory: Path, needed: int | None = None) -> tuple[int, str] | None:
    """``(errno, words)`` of a failed write under ``directory``: for want of room (``room_errno``), the
    system's words with the room there is (``room_reason``) unless the error says more already; any other
    ``OSError``'s own words; None for any other error (not a failed write: re-raised as it is)."""
    code = room_errno(error, directory, needed) if isinstance(error, Exception) else None
    if isinstance(error, OSError):
        words = error.strerror or str(error)
        return error.errno, room_reason(code, directory, needed) if words == os.strerror(code or 0) else words
    return (code, room_reason(code, directory, needed)) if code is not None else None


@contextlib.contextmanager
def room(path: str | Path, what: str, needed: int | None = None) -> Iterator[None]:
    """Run the block that writes ``what`` to ``path`` (a file, or the directory of several): a failure
    for want of room (``room_errno``) becomes one ``OSError`` "writing <what> to <path> failed:
    <room_reason>"; any other is re-raised as it is."""
    try:
        yield
    except Exception as error:
        directory = Path(path) if Path(path).is_dir() else Path(path).parent
        if room_errno(error, directory, needed) is None:
            raise
        code, words = write_failure(error, directory, needed)
        raise OSError(code, f"writing {what} to {path} failed: {words}") from None


@contextlib.contextmanager
def atomic_write(path: str | Path, what: str = "") -> Iterator[Path]:
    """Yield a temporary sibling of ``path`` to write; on success rename it onto ``path``.

    On any failure (a kill aside) the temporary file is removed; a failed write (``write_failure``: an
    ``OSError``, or a writer's own error for want of room) is re-raised as one ``OSError`` naming ``what``
    it holds, ``path`` and its cause (e.g. ``No space left on device (… free in …)``).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as error:
        tmp.unlink(missing_ok=True)
        failure = write_failure(error, path.parent) if str(path) not in str(error) else None
        if failure is not None:
            raise OSError(failure[0], f"writing {what + ' to ' if what else ''}{path} failed: {failure[1]}") from error
        raise


def write_text(path: str | Path, text: str, what: str = "") -> None:
    """Write ``text`` (``what`` it is, for a failure's message) to ``path`` atomically."""
    with atomic_write(path, what) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | Path, value: Any, what: str = "") -> None:
    """Write ``value`` as indented JSON to ``path`` atomically (``what``: ``write_text``'s)."""
    write_text(path, json.dumps(value, indent=1) + "\n", what)


def read_json(path: str | Path) -> Any:
    """The JSON document in ``path``; ``IntegrityError`` naming the file when it does not parse."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise IntegrityError(
            f"{path}: not valid JSON ({error}); the file is corrupt, delete it to start again"
        ) from None


def write_checked(path: str | Path, write: Callable[[Path], None], what: str = "") -> None:
    """``write(tmp)`` then, atomically, ``path`` and its sha256 sidecar (the sidecar last); ``what``:
    what ``path`` holds, for a failure's message."""
    with atomic_write(path, what) as tmp:
        write(tmp)
        digest = file_digest(tmp)
    write_text(sidecar(path), f"{digest}  {Path(path).name}\n", f"the sha256 of {what or Path(path).name}")


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


def save_torch(path: str | Path, value: Any, what: str = "") -> None:
    """``torch.save(value)`` to ``path`` atomically, with its sha256 sidecar (``what``: what ``value`` is,
    for a failure's message). torch's archive writer reports a short write as a ``RuntimeError``
    ("unexpected pos …"); it becomes an ``OSError`` naming ``path``: for want of room (``room_errno``:
    "No space left on device" or "File too large", with the room there is and ``value``'s tensors'
    bytes), else ``EIO`` with torch's words."""
    import torch

    def write(tmp: Path) -> None:
        needed = _tensor_bytes(value)
        try:
            torch.save(value, tmp)
            return
        except RuntimeError as error:
            failed = RuntimeError(str(error))  # not its traceback: torch's writer, holding the file open, is freed
        tmp.unlink(missing_ok=True)  # the room there is, without the partial file
        code = room_errno(failed, tmp.parent, needed)
        reason = room_reason(code, tmp.parent, needed) if code else " ".join(str(failed).split())[:200]
        raise OSError(code or errno.EIO, reason)

    write_checked(path, write, what)


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
