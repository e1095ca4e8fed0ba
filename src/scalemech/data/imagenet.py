"""ImageNet-1k (Russakovsky et al. 2015) from an ImageFolder directory, streamed to disk.

``root/{train,val}/<wnid>/*.JPEG`` (the validation images sorted into class folders, as
torchvision's ``ImageFolder`` expects); ``val`` becomes the ``test`` split. Each image is
decoded with PIL, its shorter side resized to ``resolution`` and centre-cropped to
``resolution x resolution``, and written straight into the memmap, one at a time.

Config keys: ``root`` (required), ``resolution`` (default 64), ``max_per_class`` (first n
files per class and split, sorted by name; for quick runs), ``subset``, ``split_seed``,
``workers`` (decoding processes, default 1; results are written in order, so the output does
not depend on it).
The manifest's source sha256 hashes the sorted list of relative paths (hashing ~150 GB of
JPEGs on every prepare would cost more than the prepare itself).
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
from collections.abc import Iterator
from contextlib import nullcontext
from functools import partial
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .images import IMAGE_SUFFIXES, ImageSource, decode_image, folder_layout, write_image_dataset
from .store import DataError

KIND = "image"
CONFIG_KEYS = ("root", "resolution", "max_per_class", "subset", "split_seed", "workers")
SPLIT_DIRS = {"train": "train", "test": "val"}  # our split -> folder under root


def _listing(root: Path, max_per_class: int | None) -> list[str]:
    """Relative image paths ``{train,val}/<wnid>/<file>``, sorted, the first ``max_per_class`` per class."""
    paths = []
    for folder in SPLIT_DIRS.values():
        split_dir = root / folder
        if not split_dir.is_dir():
            raise DataError(f"imagenet: {split_dir} does not exist; expected root/{{train,val}}/<wnid>/*.JPEG")
        for class_dir in sorted(e.name for e in os.scandir(split_dir) if e.is_dir()):
            files = sorted(
                e.name
                for e in os.scandir(split_dir / class_dir)
                if e.is_file() and Path(e.name).suffix.lower() in IMAGE_SUFFIXES
            )
            paths += [f"{folder}/{class_dir}/{f}" for f in files[:max_per_class]]
    return paths


def _decode_file(path: str, resolution: int) -> np.ndarray:
    with open(path, "rb") as f:
        return decode_image(f, path, resolution)


def folder_source(root: Path, resolution: int, max_per_class: int | None, workers: int = 1) -> ImageSource:
    """An ``ImageSource`` over ``root/{train,val}/<wnid>/*``, images resized on read by
    ``workers`` processes."""
    classes, files, labels = folder_layout(_listing(root, max_per_class), ("train", "val"), str(root))
    files = {split: files[folder] for split, folder in SPLIT_DIRS.items()}
    labels = {split: labels[folder] for split, folder in SPLIT_DIRS.items()}

    def read(split: str, indices: np.ndarray) -> Iterator[tuple[int, np.ndarray, str]]:
        paths = [str(root / files[split][i]) for i in indices]
        decode = partial(_decode_file, resolution=resolution)
        with multiprocessing.Pool(workers) if workers > 1 else nullcontext() as pool:
            images = pool.imap(decode, paths, chunksize=64) if pool else map(decode, paths)
            for k, pixels in enumerate(
                tqdm(images, total=len(paths), desc=f"imagenet {split}", unit="img", mininterval=10)
            ):
                yield k, pixels, paths[k]

    listing = "\n".join(files["train"] + files["test"]).encode()
    info = {
        "type": "image-folder",
        "path": str(root),
        "resolution": resolution,
        "listing_sha256": hashlib.sha256(listing).hexdigest(),
    }
    return ImageSource(classes, labels, read, info)


def prepare(name: str, cfg: dict, directory: Path, offline: bool) -> dict:
    """Write ImageNet into ``directory``; return the manifest fields."""
    if cfg.get("root") is None:
        raise DataError("imagenet: set `root:` to a directory holding train/<wnid>/ and val/<wnid>/")
    resolution = int(cfg.get("resolution", 64))
    if resolution < 1:
        raise DataError(f"imagenet: resolution {resolution} must be a positive number of pixels")
    max_per_class = cfg.get("max_per_class")
    workers = int(cfg.get("workers", 1))
    if workers < 1:
        raise DataError(f"imagenet: workers {workers} must be at least 1")
    source = folder_source(
        Path(cfg["root"]), resolution, None if max_per_class is None else int(max_per_class), workers
    )
    return write_image_dataset(directory, source, cfg.get("subset"), int(cfg.get("split_seed", 0)))
