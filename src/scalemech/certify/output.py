"""Where ``certify --out`` writes its table: checked before any work (``check_out``), written whole or
not at all (``write_out``); every error names ``--out``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

from ..models.hub import is_checkpoint_directory

TABLE_HEAD = b"point,"
"""The first bytes of a certificate table (its first column is ``point``)."""


def _in_place(path: Path) -> bool:
    """Whether ``path`` is written in place rather than replaced: something that is not a regular file
    (``/dev/stdout``, a named pipe) is never replaced."""
    return path.exists() and not path.is_file()


def _is_table(path: Path) -> bool:
    """Whether ``path`` is a certificate table ``--out`` wrote: a ``.csv`` whose header starts ``point,``."""
    with path.open("rb") as f:
        return path.suffix == ".csv" and f.read(len(TABLE_HEAD)) == TABLE_HEAD


def check_out(out: str) -> None:
    """Refuse, before any work, an ``--out`` that cannot be written or must not be: a directory, an
    existing file other than an earlier certificate table (a checkpoint's weights, say), a file inside a
    Hugging Face checkpoint directory, a place whose directory does not exist, or one where no file can
    be created (``OSError``/``ValueError`` naming ``--out``). A full disk can only be found when the
    table is written (``write_out``)."""
    path = Path(out).expanduser()
    if path.is_dir():
        raise IsADirectoryError(f"--out {out!r} is a directory; give the path of a CSV file to write")
    if _in_place(path):
        if not os.access(path, os.W_OK):
            raise PermissionError(f"--out {out!r} is not writable")
        return
    if path.is_file() and not _is_table(path):
        raise FileExistsError(
            f"--out {out!r} exists and is not a certificate table (a .csv whose header starts 'point,'); "
            "give a new file or an earlier --out table"
        )
    directory = path.resolve().parent
    if directory.is_dir() and is_checkpoint_directory(directory):
        raise ValueError(f"--out {out!r} lies in the checkpoint directory {str(directory)!r}; give a path outside it")
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        raise FileNotFoundError(f"--out {out!r}: its directory {path.parent} {what}")
    try:
        fd, probe = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".probe")
    except OSError as err:
        raise OSError(f"--out {out!r}: no file can be written in {path.parent} ({err.strerror or err})") from None
    os.close(fd)
    os.unlink(probe)


def write_out(frame: pd.DataFrame, out: str) -> None:
    """``frame`` as CSV at ``out``: a temporary file beside it, then renamed over it, so a failed write
    (a full disk) leaves no partial table; ``OSError`` naming ``--out``. A device or pipe is written in
    place."""
    path = Path(out).expanduser()
    try:
        if _in_place(path):
            frame.to_csv(path, index=False)
            return
        target = path.resolve()
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", newline="") as f:
                frame.to_csv(f, index=False)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:
        raise OSError(
            f"--out {out!r}: the table could not be written ({err.strerror or err}); nothing was written there"
        ) from None
