"""On-disk store of a prepared dataset: ``.npy`` arrays plus a checked ``manifest.json``.

Layout of ``out_dir`` (fixed; other modules rely on it)::

    train_x.npy  train_y.npy  test_x.npy  test_y.npy   # images: uint8 (N,C,H,W), int64 (N,)
    train_x.npy  test_x.npy                            # text: uint8 1-D byte streams
    manifest.json                                      # source, shapes, counts, stats, files

Arrays are written through ``np.lib.format.open_memmap`` (streamed, never whole in memory)
into a hidden sibling directory that is renamed onto ``out_dir`` only when complete, so a
failure leaves no partial output. Every load checks each file's size and ``.npy`` header
(shape, dtype) against the manifest, and its sha256 when the file is at most
``SHA256_VERIFY_MAX_BYTES`` (larger files, e.g. ImageNet, are hashed at prepare time only).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ..core.integrity import file_digest

MANIFEST = "manifest.json"
SPLITS = ("train", "test")  # the splits of every prepared dataset
FORMAT = "scalemech-data/1"
SHA256_VERIFY_MAX_BYTES = 1 << 30  # 1 GiB: hashing more on every load costs seconds per job


class DataError(RuntimeError):
    """A dataset source or a prepared dataset is missing, corrupt or inconsistent."""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_staging(out_dir: Path) -> list[Path]:
    """Remove the ``.<name>.partial-<pid>`` / ``.<name>.old-<pid>`` siblings of ``out_dir`` left by a
    killed prepare (their process is gone); return what was removed."""
    pattern = re.compile(rf"\.{re.escape(out_dir.name)}\.(?:partial|old)-(\d+)")
    matches = [(path, pattern.fullmatch(path.name)) for path in out_dir.parent.glob(f".{out_dir.name}.*")]
    stale = [path for path, match in matches if match and not _alive(int(match.group(1)))]
    for path in stale:
        shutil.rmtree(path, ignore_errors=True)
    return stale


@contextmanager
def staging(out_dir: str | Path) -> Iterator[Path]:
    """Yield an empty sibling directory of ``out_dir``; rename it onto ``out_dir`` on success.

    On any exception the staging directory is removed and ``out_dir`` is left as it was; what a
    killed earlier attempt left behind is removed first (``remove_stale_staging``).
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out_dir)
    tmp = out_dir.with_name(f".{out_dir.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if out_dir.exists():
            old = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}")
            out_dir.rename(old)
            tmp.rename(out_dir)
            shutil.rmtree(old)
        else:
            tmp.rename(out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_array(directory: Path, name: str, shape: tuple[int, ...], dtype: str) -> np.memmap:
    """A writable ``.npy`` memmap ``directory/name.npy`` of ``shape`` and ``dtype``."""
    return np.lib.format.open_memmap(directory / f"{name}.npy", mode="w+", dtype=np.dtype(dtype), shape=shape)


def file_record(path: Path, digest: bool = True) -> dict:
    """What a load checks of a ``.npy`` file: its ``.npy`` header (shape, dtype), size and sha256
    (None without ``digest``: a scratch file read once by the process that wrote it)."""
    array = np.load(path, mmap_mode="r")
    return {
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "bytes": path.stat().st_size,
        "sha256": file_digest(path) if digest else None,
    }


def write_manifest(directory: Path, manifest: dict) -> dict:
    """Add the ``format``, ``shapes`` and per-file ``files`` records of every ``.npy`` in
    ``directory`` to ``manifest``, write it as ``manifest.json`` and return it."""
    files = {p.name: file_record(p) for p in sorted(directory.glob("*.npy"))}
    manifest = {
        "format": FORMAT,
        **manifest,
        "shapes": {name.removesuffix(".npy"): rec["shape"] for name, rec in files.items()},
        "files": files,
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(out_dir: str | Path) -> dict:
    """The manifest of ``out_dir``; ``DataError`` if absent, unreadable or of another format."""
    path = Path(out_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read the dataset manifest ({err}); run the prepare step") from err
    if manifest.get("format") != FORMAT:
        raise DataError(f"{path}: format {manifest.get('format')!r}, expected {FORMAT!r}; prepare the data again")
    return manifest


def checked_npy(
    path: Path,
    record: dict,
    listed_in: str,
    remedy: str,
    error: type[DataError] = DataError,
    mmap_mode: str = "c",
    verify: bool = True,
) -> np.ndarray:
    """Memory-map the ``.npy`` at ``path`` after checking it against its ``file_record``.

    Checks size and header always, sha256 when ``verify`` and the file is at most
    ``SHA256_VERIFY_MAX_BYTES``; a mismatch raises ``error`` naming the file, what lists it
    (``listed_in``) and what to do (``remedy``).
    """
    if not path.is_file():
        raise error(f"{path}: missing (listed in {listed_in}); {remedy}")
    size = path.stat().st_size
    if size != record["bytes"]:
        raise error(f"{path}: {size} bytes, {listed_in} says {record['bytes']} (truncated?); {remedy}")
    try:
        array = np.load(path, mmap_mode=mmap_mode)
    except ValueError as err:
        raise error(f"{path}: unreadable .npy ({err}); {remedy}") from err
    if list(array.shape) != record["shape"] or str(array.dtype) != record["dtype"]:
        raise error(
            f"{path}: shape {list(array.shape)} dtype {array.dtype}, {listed_in} says "
            f"{record['shape']} {record['dtype']}; {remedy}"
        )
    if verify and record["sha256"] is None:
        raise error(f"{path}: written without a checksum ({listed_in}), so it cannot be verified; {remedy}")
    if verify and size <= SHA256_VERIFY_MAX_BYTES and file_digest(path) != record["sha256"]:
        raise error(f"{path}: sha256 differs from {listed_in}, the file was modified or corrupted; {remedy}")
    return array


def load_array(out_dir: str | Path, name: str, manifest: dict) -> np.ndarray:
    """Memory-map ``out_dir/name.npy`` (copy-on-write) after checking it against ``manifest``
    (``checked_npy``); a mismatch raises ``DataError`` naming the file."""
    path = Path(out_dir) / f"{name}.npy"
    record = manifest["files"].get(path.name)
    if record is None:
        raise DataError(f"{path}: not listed in {Path(out_dir) / MANIFEST}")
    return checked_npy(path, record, "the manifest", "prepare the data again")
