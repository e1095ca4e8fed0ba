"""Byte-level text corpora (vocabulary 256): a train and a test byte stream.

- ``tinyshakespeare`` (Karpathy 2015, char-rnn): a local ``path``, else ``url`` downloaded
  when ``download: true`` and not offline;
- ``corpus``: any local text file ``path``;
- ``pystdlib``: the running interpreter's standard-library ``.py`` sources (``sysconfig``
  'stdlib' path, without site-/dist-packages; test folders only with ``include_tests: true``);
  the manifest lists each file, its sha256 and its split;
- ``pydoc``: the English documentation text the standard library ships in ``pydoc_data.topics``
  (``help()``'s topics: the language reference's sections, about 466 kB over 79 topics), a second
  offline domain beside ``pystdlib`` (E12 grows a model trained on code into prose); the manifest
  lists each topic, its sha256 and its split.

Splits are i.i.d. where the corpus allows: ``pystdlib`` (``pydoc``) assigns whole files (topics) at random (seeded by
``split_seed``) to the test split until it holds ``test_fraction`` (default 0.1) of the bytes,
so train and test are not different libraries. A single file keeps the contiguous split (its
last ``test_fraction``) by default, or with ``split: chunks`` assigns chunks of ``chunk_bytes``
at random. Each split is written in corpus order as ``train_x.npy`` / ``test_x.npy`` (uint8,
1-D). Config keys: ``path``, ``url``, ``download``, ``test_fraction``, ``split_seed``,
``split``, ``chunk_bytes`` (single files), ``include_tests`` and ``max_files`` (pystdlib; the
first n files in sorted order).
"""

from __future__ import annotations

import hashlib
import os
import platform
import sysconfig
import urllib.request
from pathlib import Path

import numpy as np

from .store import DataError, open_array

KIND = "text"
BYTES = True  # text as bytes: a pretrained checkpoint may tokenize it
CONFIG_KEYS = {
    "tinyshakespeare": ("path", "url", "download", "test_fraction", "split", "split_seed", "chunk_bytes"),
    "corpus": ("path", "test_fraction", "split", "split_seed", "chunk_bytes"),
    "pystdlib": ("include_tests", "max_files", "test_fraction", "split_seed"),
    "pydoc": ("test_fraction", "split_seed"),
}
REQUIRED = {"corpus": ("path",)}
CHUNK_BYTES = 65536
SHAKESPEARE_URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
EXCLUDED_DIRS = {"site-packages", "dist-packages", "__pycache__"}
TEST_DIRS = {"test", "tests", "idle_test"}


def stdlib_root() -> Path:
    """The running interpreter's standard library (``sysconfig``'s 'stdlib' path)."""
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_sources(include_tests: bool = False) -> tuple[Path, list[Path]]:
    """The stdlib root and its ``.py`` files (relative, sorted), without third-party packages."""
    root = stdlib_root()
    excluded = EXCLUDED_DIRS if include_tests else EXCLUDED_DIRS | TEST_DIRS
    files = []
    for folder, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in excluded]  # prune: never walk site-packages
        files += [Path(folder, n).relative_to(root) for n in names if n.endswith(".py")]
    return root, sorted(files, key=lambda p: p.as_posix())


def pydoc_topics() -> dict[str, str]:
    """``pydoc_data.topics.topics``: help()'s topic name -> its documentation text."""
    from pydoc_data.topics import topics

    return topics


def random_split(sizes: list[int], test_fraction: float, seed: int) -> np.ndarray:
    """A boolean "is test" per part: parts in a seeded random order join the test split until it
    holds ``test_fraction`` of the bytes (at least one part in each split)."""
    if len(sizes) < 2:
        raise DataError(f"a random split needs at least 2 parts; got {len(sizes)}")
    order = np.random.default_rng(seed).permutation(len(sizes))
    test = np.zeros(len(sizes), dtype=bool)
    held, target = 0, test_fraction * sum(sizes)
    for i in order[:-1]:  # the last part stays in train
        if held >= target:
            break
        test[i], held = True, held + sizes[i]
    return test


def _write_split(directory: Path, parts: list[bytes], test: np.ndarray, where: str) -> dict:
    """``train_x.npy`` / ``test_x.npy`` (uint8, 1-D): the parts of each split in order. Returns the
    corpus' byte count and sha256."""
    total = sum(len(p) for p in parts)
    sizes = {split: sum(len(p) for p, t in zip(parts, test) if t == (split == "test")) for split in ("train", "test")}
    if total < 2 or not (sizes["train"] and sizes["test"]):
        raise DataError(f"{where}: {total} bytes cannot be split into two non-empty parts ({sizes})")
    arrays = {split: open_array(directory, f"{split}_x", (size,), "uint8") for split, size in sizes.items()}
    filled = {"train": 0, "test": 0}
    for part, is_test in zip(parts, test):
        split = "test" if is_test else "train"
        arrays[split][filled[split] : filled[split] + len(part)] = np.frombuffer(part, dtype=np.uint8)
        filled[split] += len(part)
    for array in arrays.values():
        array.flush()
    return {"bytes": total, "sha256": hashlib.sha256(b"".join(parts)).hexdigest()}


def _split_parts(
    directory: Path, named: dict[str, bytes], test_fraction: float, seed: int, where: str, listing: tuple[str, str]
) -> dict:
    """Whole named parts (files, topics) assigned at random to the splits (``random_split``) and
    written; the manifest's byte count, sha256 and, under ``listing = (key, field)``, each part's name
    (as ``field``), its sha256 and its split."""
    parts = list(named.values())
    test = random_split([len(p) for p in parts], test_fraction, seed)
    return {
        **_write_split(directory, parts, test, where),
        listing[0]: [
            {listing[1]: name, "sha256": hashlib.sha256(part).hexdigest(), "split": "test" if is_test else "train"}
            for name, part, is_test in zip(named, parts, test)
        ],
    }


def _cut_sizes(total: int, cfg: dict, test_fraction: float) -> tuple[list[int], np.ndarray]:
    """A single file of ``total`` bytes: its parts' sizes, in order, and test flags: ``split: contiguous``
    (default, the last ``test_fraction`` of the bytes) or ``chunks`` (random chunks of ``chunk_bytes``)."""
    if cfg.get("split", "contiguous") == "contiguous":
        cut = round((1.0 - test_fraction) * total)
        return [cut, total - cut], np.array([False, True])
    size = int(cfg.get("chunk_bytes", CHUNK_BYTES))
    sizes = [min(size, total - i) for i in range(0, total, size)]
    return sizes, random_split(sizes, test_fraction, int(cfg.get("split_seed", 0)))


def _cut(data: bytes, cfg: dict, test_fraction: float) -> tuple[list[bytes], np.ndarray]:
    """A single file's parts and test flags (``_cut_sizes``)."""
    sizes, test = _cut_sizes(len(data), cfg, test_fraction)
    starts = np.cumsum([0, *sizes[:-1]])
    return [data[start : start + size] for start, size in zip(starts, sizes)], test


def _local_file(name: str, cfg: dict) -> Path:
    """The local text file ``cfg``'s ``path`` names; ``DataError`` when it is none."""
    path = Path(cfg["path"])
    if not path.is_file():
        problem = "is a directory" if path.is_dir() else "does not exist"
        raise DataError(f"{name}: {path} {problem}; set `path:` to a local text file")
    return path


def _named_parts(name: str, cfg: dict) -> dict[str, Path | str]:
    """``pystdlib``'s files (each a path) or ``pydoc``'s topics (each its text), by name, in order."""
    if name == "pystdlib":
        root, files = stdlib_sources(bool(cfg.get("include_tests", False)))
        return {f.as_posix(): root / f for f in files[: cfg.get("max_files")]}
    return dict(sorted(pydoc_topics().items()))


def split_bytes(name: str, cfg: dict) -> dict[str, int] | None:
    """Bytes of each split ``prepare`` writes for text data set ``name`` with ``cfg``, from the sources'
    sizes alone (nothing is read but ``pydoc``'s topics, which are in memory): None where the source is
    a download (tinyshakespeare without ``path``); ``DataError`` for a ``path`` that is no file."""
    test_fraction = float(cfg.get("test_fraction", 0.1))
    if name in ("pystdlib", "pydoc"):
        parts = _named_parts(name, cfg).values()
        sizes = [p.stat().st_size if isinstance(p, Path) else len(p.encode()) for p in parts]
        test = random_split(sizes, test_fraction, int(cfg.get("split_seed", 0)))
    elif cfg.get("path") is not None:
        sizes, test = _cut_sizes(_local_file(name, cfg).stat().st_size, cfg, test_fraction)
    elif name == "corpus":
        raise DataError("corpus: set `path:` to a local text file")
    else:
        return None
    return {split: sum(size for size, t in zip(sizes, test) if t == (split == "test")) for split in ("train", "test")}


def _text_file(name: str, cfg: dict, directory: Path, offline: bool) -> tuple[Path, dict]:
    """The local file to read and its source entry; tinyshakespeare without a ``path`` is
    downloaded into ``directory`` when allowed."""
    if cfg.get("path") is not None:
        path = _local_file(name, cfg)
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
    """Write text source ``name`` (tinyshakespeare, corpus, pystdlib, pydoc) into ``directory``; return the
    manifest fields."""
    test_fraction = float(cfg.get("test_fraction", 0.1))
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"{name}: test_fraction {test_fraction} must lie strictly between 0 and 1")
    if name in ("pystdlib", "pydoc"):
        parts = _named_parts(name, cfg)
        named = {key: p.read_bytes() if isinstance(p, Path) else p.encode() for key, p in parts.items()}
        if name == "pystdlib":
            tests = bool(cfg.get("include_tests", False))
            source = {"type": "pystdlib", "path": str(stdlib_root()), "include_tests": tests}
        else:
            source = {"type": "pydoc", "module": "pydoc_data.topics", "python": platform.python_version()}
        listing = ("files", "path") if name == "pystdlib" else ("topics", "topic")
        seed = int(cfg.get("split_seed", 0))
        source.update(_split_parts(directory, named, test_fraction, seed, source.get("path", source["type"]), listing))
    else:
        path, source = _text_file(name, cfg, directory, offline)
        parts, test = _cut(path.read_bytes(), cfg, test_fraction)
        source.update(_write_split(directory, parts, test, str(path)), split=cfg.get("split", "contiguous"))
        if source["type"] == "url":
            path.unlink()
    return {"kind": "text", "source": source, "vocab_size": 256, "test_fraction": test_fraction}
