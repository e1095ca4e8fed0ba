"""Byte-level text corpora (vocabulary 256): one byte stream, split contiguously.

- ``tinyshakespeare`` (Karpathy 2015, char-rnn): a local ``path``, else ``url`` downloaded
  when ``download: true`` and not offline;
- ``corpus``: any local text file ``path``;
- ``pystdlib``: the running interpreter's standard-library ``.py`` sources (``sysconfig``
  'stdlib' path, without site-/dist-packages; test folders only with ``include_tests: true``),
  sorted by relative path and concatenated; the manifest lists each file and its sha256.

The first ``1 - test_fraction`` (default 0.9) of the stream is ``train_x.npy``, the rest
``test_x.npy`` (uint8, 1-D). Config keys: ``path``, ``url``, ``download``, ``test_fraction``,
``include_tests`` and ``max_files`` (pystdlib; the first n files in sorted order).
"""

from __future__ import annotations

import hashlib
import os
import sysconfig
import urllib.request
from pathlib import Path

import numpy as np

from .store import DataError, open_array

CONFIG_KEYS = {
    "tinyshakespeare": ("path", "url", "download", "test_fraction"),
    "corpus": ("path", "test_fraction"),
    "pystdlib": ("include_tests", "max_files", "test_fraction"),
}
SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
EXCLUDED_DIRS = {"site-packages", "dist-packages", "__pycache__"}
TEST_DIRS = {"test", "tests", "idle_test"}


def stdlib_sources(include_tests: bool = False) -> tuple[Path, list[Path]]:
    """The stdlib root and its ``.py`` files (relative, sorted), without third-party packages."""
    root = Path(sysconfig.get_paths()["stdlib"])
    excluded = EXCLUDED_DIRS if include_tests else EXCLUDED_DIRS | TEST_DIRS
    files = []
    for folder, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in excluded]  # prune: never walk site-packages
        files += [Path(folder, n).relative_to(root) for n in names if n.endswith(".py")]
    return root, sorted(files, key=lambda p: p.as_posix())


def _write_stream(directory: Path, files: list[Path], test_fraction: float, where: str) -> tuple[dict, list[str]]:
    """Concatenate ``files`` byte for byte into ``train_x.npy`` | ``test_x.npy`` (uint8, 1-D),
    cut at ``round((1 - test_fraction) * total)``. Returns the stream's byte count and sha256,
    and the sha256 of each file."""
    total = sum(f.stat().st_size for f in files)
    if total == 0:
        raise DataError(f"{where}: empty text; a byte-level corpus needs at least 2 bytes")
    cut = round((1.0 - test_fraction) * total)
    if not 0 < cut < total:
        raise DataError(f"{where}: {total} bytes cannot be split with test_fraction {test_fraction} "
                        "into two non-empty parts")
    train = open_array(directory, "train_x", (cut,), "uint8")
    test = open_array(directory, "test_x", (total - cut,), "uint8")
    stream_sha, file_shas = hashlib.sha256(), []
    position = 0
    for path in files:
        data = path.read_bytes()
        stream_sha.update(data)
        file_shas.append(hashlib.sha256(data).hexdigest())
        chunk = np.frombuffer(data, dtype=np.uint8)
        head = max(0, min(len(chunk), cut - position))  # bytes of this file that belong to train
        train[position:position + head] = chunk[:head]
        if head < len(chunk):
            test[position + head - cut:position + len(chunk) - cut] = chunk[head:]
        position += len(chunk)
    if position != total:
        raise DataError(f"{where}: read {position} bytes, expected {total}; a file changed during prepare")
    train.flush()
    test.flush()
    return {"bytes": total, "sha256": stream_sha.hexdigest()}, file_shas


def _text_file(name: str, cfg: dict, directory: Path, offline: bool) -> tuple[Path, dict]:
    """The local file to read and its source entry; tinyshakespeare without a ``path`` is
    downloaded into ``directory`` when allowed."""
    if cfg.get("path") is not None:
        path = Path(cfg["path"])
        if not path.is_file():
            raise DataError(f"{name}: {path} does not exist; set `path:` to a local text file")
        return path, {"type": "file", "path": str(path)}
    if name == "corpus":
        raise DataError("corpus: set `path:` to a local text file")
    url = cfg.get("url", SHAKESPEARE_URL)
    if offline or not cfg.get("download", False):
        reason = "offline" if offline else "`download` is false"
        raise DataError(f"{name}: no `path:` and {reason}; save {url} to a file and set `path:` to it")
    path = directory / "download.txt"
    try:
        urllib.request.urlretrieve(url, path)
    except OSError as err:
        raise DataError(f"{name}: download of {url} failed ({err}); save it to a file and set `path:`") from err
    return path, {"type": "url", "url": url}


def prepare(name: str, cfg: dict, directory: Path, offline: bool) -> dict:
    """Write text dataset ``name`` into ``directory``; return the manifest fields."""
    test_fraction = float(cfg.get("test_fraction", 0.1))
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"{name}: test_fraction {test_fraction} must lie strictly between 0 and 1")
    if name == "pystdlib":
        root, files = stdlib_sources(bool(cfg.get("include_tests", False)))
        files = files[:cfg.get("max_files")]
        stream, file_shas = _write_stream(directory, [root / f for f in files], test_fraction, str(root))
        source = {"type": "pystdlib", "path": str(root), "include_tests": bool(cfg.get("include_tests", False)),
                  **stream, "files": [{"path": f.as_posix(), "sha256": sha} for f, sha in zip(files, file_shas)]}
    else:
        path, source = _text_file(name, cfg, directory, offline)
        source.update(_write_stream(directory, [path], test_fraction, str(path))[0])
        if source["type"] == "url":
            path.unlink()
    return {"kind": "text", "source": source, "vocab_size": 256, "test_fraction": test_fraction}
