"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009, https://www.cs.toronto.edu/~kriz/cifar.html).

Three sources, tried in this order:

- ``archive``: a local tarball, either the official python version (``cifar-10-python.tar.gz``,
  ``cifar-100-python.tar.gz``; md5 checked against ``OFFICIAL_MD5``) or an image-folder
  archive ``.../{train,test}/<class>/*.{png,jpg}``;
- the official tarball already in ``root``;
- a download into ``root`` (torchvision's ``download_url``) when ``download: true`` and not offline.

Config keys: ``archive``, ``root`` (default ``data``), ``download`` (default false),
``subset`` ({train: n, test: n}, stratified), ``split_seed`` (default 0; seeds the subset).
Labels always index the sorted class names (for CIFAR the official order is already sorted).
"""

from __future__ import annotations

import pickle
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

import numpy as np

from .images import ImageSource, array_source, decode_image, folder_layout, write_image_dataset
from .store import DataError, file_digest

KIND = "image"
CONFIG_KEYS = ("archive", "root", "download", "subset", "split_seed")
OFFICIAL_URL = {
    "cifar10": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    "cifar100": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
}
OFFICIAL_MD5 = {"cifar10": "c58f30108f718f92721af3b95e74349a", "cifar100": "eb9058c3a382ffc7106e4002c42a8d85"}
# name -> (top folder, train members, test member, meta member, label key, class-names key)
OFFICIAL_LAYOUT = {
    "cifar10": (
        "cifar-10-batches-py",
        [f"data_batch_{i}" for i in range(1, 6)],
        "test_batch",
        "batches.meta",
        "labels",
        "label_names",
    ),
    "cifar100": ("cifar-100-python", ["train"], "test", "meta", "fine_labels", "fine_label_names"),
}
_TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


@contextmanager
def _open_tar(archive: Path, mode: str = "r|*") -> Iterator[tarfile.TarFile]:
    """Open ``archive`` (streaming by default); read errors become ``DataError`` naming it."""
    try:
        with tarfile.open(archive, mode) as tar:
            yield tar
    except _TAR_ERRORS as err:
        raise DataError(f"{archive}: unreadable, truncated or corrupt archive ({type(err).__name__}: {err})") from err


def _unpickle(tar: tarfile.TarFile, member: tarfile.TarInfo) -> dict:
    """A CIFAR batch dict with ``str`` keys (the official files are Python 2 pickles)."""
    batch = pickle.load(tar.extractfile(member), encoding="latin1")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}


def python_tarball(name: str, archive: Path) -> ImageSource:
    """The official python-version tarball of ``name``, md5 checked, fully read into memory."""
    md5 = file_digest(archive, "md5")
    if md5 != OFFICIAL_MD5[name]:
        raise DataError(
            f"{archive}: md5 {md5} differs from the official {name} md5 {OFFICIAL_MD5[name]}; "
            "the download is truncated or corrupt, fetch it again"
        )
    top, train_members, test_member, meta_member, label_key, names_key = OFFICIAL_LAYOUT[name]
    with _open_tar(archive, "r:*") as tar:
        members = {PurePosixPath(m.name).name: m for m in tar.getmembers() if m.isfile()}
        missing = [m for m in [*train_members, test_member, meta_member] if m not in members]
        if missing:
            raise DataError(f"{archive}: lacks {missing} under {top}/")
        batches = {
            "train": [_unpickle(tar, members[m]) for m in train_members],
            "test": [_unpickle(tar, members[test_member])],
        }
        names = [n.decode() if isinstance(n, bytes) else n for n in _unpickle(tar, members[meta_member])[names_key]]
    new_label = np.argsort(np.argsort(names))  # official label -> index among sorted names
    x = {s: np.concatenate([b["data"] for b in bs]).reshape(-1, 3, 32, 32) for s, bs in batches.items()}
    y = {s: new_label[np.concatenate([b[label_key] for b in bs])] for s, bs in batches.items()}
    info = {"type": "cifar-python-tarball", "path": str(archive), "md5": md5, "sha256": file_digest(archive)}
    return array_source(x, y, sorted(names), info)


def folder_archive(archive: Path) -> ImageSource:
    """An image-folder tarball ``.../{train,test}/<class>/*.{png,jpg}``; pixels decoded on read."""
    with _open_tar(archive) as tar:
        paths = [m.name for m in tar if m.isfile()]
    classes, files, labels = folder_layout(paths, ("train", "test"), str(archive))

    def read(split: str, indices: np.ndarray) -> Iterator[tuple[int, np.ndarray, str]]:
        position = {files[split][i]: k for k, i in enumerate(indices)}
        with _open_tar(archive) as tar:
            for member in tar:  # archive order: one forward pass through the gzip stream
                if member.name in position:
                    pixels = decode_image(tar.extractfile(member), f"{archive}:{member.name}")
                    yield position[member.name], pixels, member.name

    info = {"type": "image-folder-archive", "path": str(archive), "sha256": file_digest(archive)}
    return ImageSource(classes, labels, read, info)


def _is_python_tarball(name: str, archive: Path) -> bool:
    with _open_tar(archive) as tar:
        first = tar.next()
    return first is not None and PurePosixPath(first.name).parts[0] == OFFICIAL_LAYOUT[name][0]


def locate_archive(name: str, cfg: dict, offline: bool) -> Path:
    """The archive to read: ``cfg['archive']``, else the official tarball in ``root``
    (downloaded there first when ``download`` is true and not offline)."""
    if cfg.get("archive") is not None:
        archive = Path(cfg["archive"])
        if not archive.is_file():
            raise DataError(f"{name}: archive {archive} does not exist")
        return archive
    root = Path(cfg.get("root", "data"))
    archive = root / PurePosixPath(OFFICIAL_URL[name]).name
    if archive.is_file():
        return archive
    where = (
        f"put the official {archive.name} at {archive}, or set `archive:` to it or to an "
        f"image-folder archive {{train,test}}/<class>/*.png"
    )
    if offline or not cfg.get("download", False):
        reason = "offline" if offline else "`download` is false"
        raise DataError(f"{name}: no local archive and {reason}: {where}")
    from torchvision.datasets.utils import download_url

    try:
        download_url(OFFICIAL_URL[name], str(root), archive.name, OFFICIAL_MD5[name])
    except Exception as err:  # network errors come in many types; all mean the same to the user
        raise DataError(f"{name}: download of {OFFICIAL_URL[name]} failed ({err}); {where}") from err
    return archive


def prepare(name: str, cfg: dict, directory: Path, offline: bool) -> dict:
    """Write CIFAR ``name`` into ``directory``; return the manifest fields."""
    archive = locate_archive(name, cfg, offline)
    source = python_tarball(name, archive) if _is_python_tarball(name, archive) else folder_archive(archive)
    return write_image_dataset(directory, source, cfg.get("subset"), int(cfg.get("split_seed", 0)))
